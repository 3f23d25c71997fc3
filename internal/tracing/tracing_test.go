package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
)

func TestLogHandlerAddsTheContextsIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	line := func() map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatalf("%v: %s", err, buf.String())
		}
		buf.Reset()
		return m
	}

	log.Info("no context")
	if m := line(); m["trace_id"] != nil || m["workflow_id"] != nil || m["component"] != "test" {
		t.Errorf("a line without a context: %v", m)
	}

	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	log.InfoContext(ctx, "in a span")
	if m := line(); m["trace_id"] != tid.String() || m["span_id"] != sid.String() {
		t.Errorf("a line in a span: %v", m)
	}

	// In an activity, the line names its workflow and activity.
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		log.WarnContext(ctx, "from an activity")
		return nil
	}, activity.RegisterOptions{Name: "ToolStep"})
	if _, err := env.ExecuteActivity("ToolStep"); err != nil {
		t.Fatal(err)
	}
	m := line()
	if id, _ := m["workflow_id"].(string); m["activity"] != "ToolStep" || id == "" || m["run_id"] == nil {
		t.Errorf("a line from an activity: %v", m)
	}
}

func TestStartWantsAnEndpointURL(t *testing.T) {
	if p, err := Start(context.Background(), "", "worker", "v0"); p != nil || err != nil {
		t.Errorf("no endpoint: %v, %v; want no tracing", p, err)
	}
	for _, bad := range []string{"otel-collector:4317", "grpc://otel:4317", "http://"} {
		if _, err := Start(context.Background(), bad, "worker", "v0"); err == nil || !strings.Contains(err.Error(), "http://otel-collector:4317") {
			t.Errorf("%q: %v, want an error that shows the form", bad, err)
		}
	}
	p, err := Start(context.Background(), "http://127.0.0.1:4317", "worker", "v0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}
