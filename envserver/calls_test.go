package envserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool reports progress and logs through its call's context: progress reaches a client that
// asked for it, log records reach the client at or above the level it set, and the server's own
// log always; over both transports.
func TestToolProgressAndLogging(t *testing.T) {
	serverLog := &syncBuffer{}
	s := New("calls", WithLogger(slog.New(slog.NewTextHandler(serverLog, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	MustAddTool(s, "work", "Work in three steps", func(ctx context.Context, in struct{}) (map[string]int, error) {
		for i := 1; i <= 3; i++ {
			if err := Progress(ctx, float64(i), 3, "step"); err != nil {
				return nil, err
			}
		}
		Logger(ctx).Debug("fine detail")
		Logger(ctx).Info("working", "steps", 3)
		Logger(ctx).Warn("almost out of coffee")
		return map[string]int{"steps": 3}, nil
	})
	hub := NewHub("evaluate")
	MustAddTool(hub, "check", "Check with progress", func(ctx context.Context, in struct{}) (map[string]bool, error) {
		Logger(ctx).Info("checking")
		return map[string]bool{"ok": true}, Progress(ctx, 1, 1, "checked")
	})
	if err := s.Mount(hub); err != nil {
		t.Fatal(err)
	}
	ts := serveHTTPTest(t, s)

	for transport, connect := range map[string]func(o clientOptions) (*mcp.ClientSession, error){
		"in-memory": func(o clientOptions) (*mcp.ClientSession, error) { return connectInMemory(t, s, o) },
		"http":      func(o clientOptions) (*mcp.ClientSession, error) { return connectHTTP(t, ts.URL, o) },
	} {
		t.Run(transport, func(t *testing.T) {
			progress, logs := &progressLog{}, &logLog{}
			cs, err := connect(clientOptions{progress: progress, logs: logs})
			if err != nil {
				t.Fatal(err)
			}
			// Before the client sets a level, nothing is sent; without a token, no progress.
			callTool(t, cs, "work", map[string]any{})
			if n := len(progress.all()); n != 0 {
				t.Errorf("progress without a token: %d notifications", n)
			}
			if err := cs.SetLoggingLevel(testContext(t), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: "work", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": "w1"}})
			if err != nil || res.IsError {
				t.Fatalf("work = %+v, %v", res, err)
			}
			for i := 0; i < 200 && len(progress.all()) < 3; i++ {
				time.Sleep(10 * time.Millisecond) // notifications are handled apart from the answer
			}
			if got := progress.all(); len(got) != 3 || got[2].Progress != 3 || got[2].Total != 3 || got[0].ProgressToken != "w1" {
				t.Errorf("progress = %+v", got)
			}
			callTool(t, cs, "evaluate", map[string]any{"name": "check", "arguments": map[string]any{}})
			logs.waitFor(t, 3)
			if got := logs.text(); !strings.Contains(got, "info work") || !strings.Contains(got, `"steps":3`) || !strings.Contains(got, "warning work") ||
				strings.Contains(got, "fine detail") || !strings.Contains(got, "info check") {
				t.Errorf("client logs:\n%s", got)
			}
		})
	}
	if got := serverLog.String(); !strings.Contains(got, "fine detail") || !strings.Contains(got, "almost out of coffee") || !strings.Contains(got, "checking") {
		t.Errorf("server log lacks the tools' records:\n%s", got)
	}
	// Outside a tool call the helpers do nothing harmful.
	if err := Progress(context.Background(), 1, 1, "x"); err != nil {
		t.Errorf("progress outside a call: %v", err)
	}
	if Logger(context.Background()) == nil {
		t.Error("no logger outside a call")
	}
}

// logLog collects the log notifications a client receives.
type logLog struct {
	mu   sync.Mutex
	msgs []*mcp.LoggingMessageParams
}

func (l *logLog) add(p *mcp.LoggingMessageParams) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, p)
}

func (l *logLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b bytes.Buffer
	for _, m := range l.msgs {
		data, _ := json.Marshal(m.Data)
		fmt.Fprintf(&b, "%s %s %s\n", m.Level, m.Logger, data)
	}
	return b.String()
}

func (l *logLog) waitFor(t *testing.T, n int) {
	t.Helper()
	for range 200 {
		l.mu.Lock()
		got := len(l.msgs)
		l.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("fewer than %d log notifications:\n%s", n, l.text())
}
