package envserver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestInitializeHookRunsBeforeTheResultIsSent(t *testing.T) {
	s := New("env", WithLogger(quietLogger()))
	release := make(chan struct{})
	started := make(chan struct{})
	s.OnInitialize(func(ctx context.Context, ic *InitContext) error {
		close(started)
		<-release
		return nil
	})
	connected := make(chan error, 1)
	go func() {
		_, err := connectInMemory(t, s, clientOptions{})
		connected <- err
	}()
	<-started
	select {
	case err := <-connected:
		t.Fatalf("initialize answered while the hook was still running (err=%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-connected; err != nil {
		t.Fatalf("initialize after the hook: %v", err)
	}
}

func TestInitializeHookRunsOncePerServer(t *testing.T) {
	tests := []struct {
		name    string
		connect func(t *testing.T, s *Server) func() error
	}{
		{"in-memory sessions", func(t *testing.T, s *Server) func() error {
			return func() error { _, err := connectInMemory(t, s, clientOptions{}); return err }
		}},
		{"streamable HTTP sessions", func(t *testing.T, s *Server) func() error {
			ts := serveHTTPTest(t, s)
			return func() error { _, err := connectHTTP(t, ts.URL, clientOptions{}); return err }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New("env", WithLogger(quietLogger()))
			var runs atomic.Int32
			s.OnInitialize(func(ctx context.Context, ic *InitContext) error {
				runs.Add(1)
				time.Sleep(50 * time.Millisecond) // widen the window for concurrent sessions
				return nil
			})
			connect := tt.connect(t, s)
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 4 {
				wg.Go(func() { errs <- connect() })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
			}
			if got := runs.Load(); got != 1 {
				t.Fatalf("hook ran %d times for 4 sessions, want 1", got)
			}
		})
	}
}

func TestToolsRegisteredBeforeAndDuringTheHookWork(t *testing.T) {
	s := New("env", WithLogger(quietLogger()))
	type none struct{}
	type said struct {
		Word string `json:"word"`
	}
	MustAddTool(s, "before", "registered before Run", func(ctx context.Context, _ none) (said, error) {
		return said{"before"}, nil
	})
	s.OnInitialize(func(ctx context.Context, ic *InitContext) error {
		_, err := AddTool(s, "during", "registered by the hook", func(ctx context.Context, _ none) (said, error) {
			return said{"during"}, nil
		})
		return err
	})
	cs := mustConnect(t, s)
	MustAddTool(s, "after", "registered after initialize", func(ctx context.Context, _ none) (said, error) {
		return said{"after"}, nil
	})
	for _, name := range []string{"before", "during", "after"} {
		if got := structured[said](t, callTool(t, cs, name, map[string]any{})).Word; got != name {
			t.Errorf("tool %s answered %q", name, got)
		}
	}
}

func TestInitContextCarriesTheClientMeta(t *testing.T) {
	tests := []struct {
		name       string
		meta       mcp.Meta
		wantToken  any
		wantWidth  int
		wantHeight int
	}{
		{"no meta falls back to 1920x1080", nil, nil, 1920, 1080},
		{"display size and token", mcp.Meta{"progressToken": "tok-1", "display_width": 1280, "display_height": 720}, "tok-1", 1280, 720},
		{"numeric strings are accepted", mcp.Meta{"display_width": "800", "display_height": "600"}, nil, 800, 600},
		{"nonsense falls back", mcp.Meta{"display_width": "wide", "display_height": -3}, nil, 1920, 1080},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New("env", WithLogger(quietLogger()))
			var got *InitContext
			s.OnInitialize(func(ctx context.Context, ic *InitContext) error {
				got = ic
				return nil
			})
			if _, err := connectInMemory(t, s, clientOptions{initMeta: tt.meta}); err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("hook did not run")
			}
			if got.ProgressToken != tt.wantToken || got.DisplayWidth != tt.wantWidth || got.DisplayHeight != tt.wantHeight {
				t.Errorf("token=%v size=%dx%d, want token=%v size=%dx%d",
					got.ProgressToken, got.DisplayWidth, got.DisplayHeight, tt.wantToken, tt.wantWidth, tt.wantHeight)
			}
			if got.Session == nil || got.Params == nil || got.Params.ClientInfo.Name != "envserver-test" {
				t.Errorf("session=%v params=%+v, want the initializing session and its params", got.Session, got.Params)
			}
		})
	}
}

func TestInitializeProgress(t *testing.T) {
	tests := []struct {
		name      string
		meta      mcp.Meta
		hookErr   error
		transport string
		want      []string // messages of the progress notifications, in order
		wantErr   string
	}{
		{"token: progress is sent with it", mcp.Meta{"progressToken": "init-1"}, nil, "memory", []string{"seeding db", "ready"}, ""},
		{"token over streamable HTTP", mcp.Meta{"progressToken": "init-2"}, nil, "http", []string{"seeding db", "ready"}, ""},
		{"no token: nothing is sent", nil, nil, "memory", nil, ""},
		{"hook error with token: failure notification and error", mcp.Meta{"progressToken": 7}, errors.New("db down"), "memory",
			[]string{"seeding db", "Initialization failed: db down"}, "Initialization failed: db down"},
		{"hook error without token: error only", nil, errors.New("db down"), "memory", nil, "Initialization failed: db down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New("env", WithLogger(quietLogger()))
			s.OnInitialize(func(ctx context.Context, ic *InitContext) error {
				if err := ic.Progress(ctx, 40, 100, "seeding db"); err != nil {
					return err
				}
				if tt.hookErr != nil {
					return tt.hookErr
				}
				return ic.Progress(ctx, 100, 100, "ready")
			})
			log := &progressLog{}
			opts := clientOptions{initMeta: tt.meta, progress: log}
			var err error
			if tt.transport == "http" {
				_, err = connectHTTP(t, serveHTTPTest(t, s).URL, opts)
			} else {
				_, err = connectInMemory(t, s, opts)
			}
			if tt.wantErr == "" && err != nil {
				t.Fatalf("connect: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("connect error = %v, want one containing %q", err, tt.wantErr)
			}
			// Notifications are handled asynchronously by the client; give them a moment.
			deadline := time.Now().Add(2 * time.Second)
			for len(log.all()) < len(tt.want) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			got := log.all()
			if len(got) != len(tt.want) {
				t.Fatalf("got %d progress notifications %v, want %v", len(got), got, tt.want)
			}
			for i, n := range got {
				if n.Message != tt.want[i] {
					t.Errorf("notification %d: message %q, want %q", i, n.Message, tt.want[i])
				}
				if tok := tt.meta["progressToken"]; n.ProgressToken != tok && !(isNumber(tok) && isNumber(n.ProgressToken)) {
					t.Errorf("notification %d: token %v (%T), want %v", i, n.ProgressToken, n.ProgressToken, tok)
				}
				if n.Total != 100 {
					t.Errorf("notification %d: total %v, want 100", i, n.Total)
				}
			}
		})
	}
}

func isNumber(v any) bool {
	switch v.(type) {
	case int, int64, float64:
		return true
	}
	return false
}

func TestInitializeFailureIsKeptForLaterSessions(t *testing.T) {
	s := New("env", WithLogger(quietLogger()))
	var runs atomic.Int32
	s.OnInitialize(func(ctx context.Context, ic *InitContext) error {
		runs.Add(1)
		return errors.New("no database")
	})
	for i := range 2 {
		_, err := connectInMemory(t, s, clientOptions{})
		if err == nil || !strings.Contains(err.Error(), "Initialization failed: no database") {
			t.Fatalf("session %d: connect error = %v, want the hook's error", i, err)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("hook ran %d times, want 1", runs.Load())
	}
}

func TestInitializeHookPanicIsAnError(t *testing.T) {
	s := New("env", WithLogger(quietLogger()))
	s.OnInitialize(func(ctx context.Context, ic *InitContext) error { panic("boom") })
	_, err := connectInMemory(t, s, clientOptions{})
	if err == nil || !strings.Contains(err.Error(), "panic: boom") {
		t.Fatalf("connect error = %v, want the panic as an initialize error", err)
	}
}
