package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
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

	// In an activity, the line names its workflow and activity, and a run list's its job.
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

	// A run list's activities name its job; a rollout's, its attempt.
	for _, c := range []struct{ workflowID, key string }{
		{"runlist/0b6f1c2e-5a4d-4c3b-9e8f-7a6b5c4d3e2f", "job_id"},
		{"rollout/4bf92f35-77b3-4da6-a3ce-929d0e0e4736", "attempt_id"},
	} {
		wenv := s.NewTestWorkflowEnvironment()
		wenv.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: c.workflowID})
		wenv.RegisterActivityWithOptions(func(ctx context.Context) error {
			log.InfoContext(ctx, "from a workflow's activity")
			return nil
		}, activity.RegisterOptions{Name: "SetJobStatus"})
		wenv.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
			ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
			return workflow.ExecuteActivity(ctx, "SetJobStatus").Get(ctx, nil)
		}, workflow.RegisterOptions{Name: "RunList"})
		wenv.ExecuteWorkflow("RunList")
		if err := wenv.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		_, id, _ := strings.Cut(c.workflowID, "/")
		if m := line(); m[c.key] != id || m["workflow_id"] != c.workflowID {
			t.Errorf("a line of %s's activity: %v, want %s %s", c.workflowID, m, c.key, id)
		}
	}
}

func TestStartWantsAnEndpointURL(t *testing.T) {
	if p, err := Start(context.Background(), "", "worker", "v0", slog.Default()); p != nil || err != nil {
		t.Errorf("no endpoint: %v, %v; want no tracing", p, err)
	}
	for _, bad := range []string{"otel-collector:4317", "grpc://otel:4317", "http://"} {
		if _, err := Start(context.Background(), bad, "worker", "v0", slog.Default()); err == nil || !strings.Contains(err.Error(), "http://otel-collector:4317") {
			t.Errorf("%q: %v, want an error that shows the form", bad, err)
		}
	}
	p, err := Start(context.Background(), "http://127.0.0.1:4317", "worker", "v0", slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}
