package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// Requests are counted by the route pattern they matched, method and status; the other
// families count what their callers report.
func TestFamilies(t *testing.T) {
	m := New()
	for _, r := range []struct {
		route  string
		status int
	}{{"GET /jobs/{id}", 404}, {"GET /jobs/{id}", 404}, {"GET /ok", 200}, {"", 404}} {
		m.Request(r.route, "GET", r.status, 10*time.Millisecond)
	}
	m.SandboxStarted("process", "sandboxes-cpu")
	m.SandboxFailed("process", "sandboxes-cpu", "capacity")
	m.AttemptEnded("completed")
	m.ModelCall("gpt", 1500*time.Millisecond, true, 100, 20, 0.25)
	m.ModelCall("gpt", time.Second, false, 0, 0, 0)
	out := scrape(t, m)
	for _, want := range []string{
		`proctor_http_requests_total{method="GET",route="GET /jobs/{id}",status="404"} 2`,
		`proctor_http_requests_total{method="GET",route="GET /ok",status="200"} 1`,
		`proctor_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`proctor_sandboxes_started_total{provider="process",queue="sandboxes-cpu"} 1`,
		`proctor_sandboxes_failed_total{provider="process",queue="sandboxes-cpu",reason="capacity"} 1`,
		`proctor_attempts_ended_total{status="completed"} 1`,
		`proctor_model_step_seconds_count{model="gpt",status="ok"} 1`,
		`proctor_model_step_seconds_count{model="gpt",status="error"} 1`,
		`proctor_inference_tokens_total{kind="prompt",model="gpt"} 100`,
		`proctor_inference_tokens_total{kind="completion",model="gpt"} 20`,
		`proctor_inference_cost_usd_total{model="gpt"} 0.25`,
		`process_cpu_seconds_total`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
}

// A nil *Metrics records nothing.
func TestNilRecordsNothing(t *testing.T) {
	var m *Metrics
	m.SandboxStarted("p", "q")
	m.SandboxFailed("p", "q", "error")
	m.AttemptEnded("error")
	m.ModelCall("m", time.Second, true, 1, 1, 1)
	m.Register(nil)
	m.Request("/x", "GET", 200, time.Second)
}

// The Temporal SDK's metrics: a family carries the union of the tags its series were given
// (empty where one lacks a tag), and timers are histograms in seconds.
func TestTemporalSDKMetrics(t *testing.T) {
	m := New()
	h := m.Temporal().WithTags(map[string]string{"namespace": "ns"})
	h.WithTags(map[string]string{"operation": "Poll"}).Counter("temporal_request").Inc(2)
	h.Counter("temporal_request").Inc(1)
	h.WithTags(map[string]string{"task_queue": "q"}).Gauge("temporal_num_pollers").Update(3)
	timer := h.WithTags(map[string]string{"activity_type": "ToolStep"}).Timer("temporal_activity_execution_latency")
	timer.Record(20 * time.Millisecond)
	timer.Record(2 * time.Minute)
	out := scrape(t, m)
	for _, want := range []string{
		`temporal_request{namespace="ns",operation="Poll"} 2`,
		`temporal_request{namespace="ns",operation=""} 1`,
		`temporal_num_pollers{namespace="ns",task_queue="q"} 3`,
		`temporal_activity_execution_latency_seconds_bucket{activity_type="ToolStep",namespace="ns",le="0.025"} 1`,
		`temporal_activity_execution_latency_seconds_bucket{activity_type="ToolStep",namespace="ns",le="+Inf"} 2`,
		`temporal_activity_execution_latency_seconds_count{activity_type="ToolStep",namespace="ns"} 2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	var nilMetrics *Metrics
	if nilMetrics.Temporal() != nil {
		t.Error("a nil *Metrics gave a Temporal handler")
	}
}
