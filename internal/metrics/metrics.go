// Package metrics holds the Prometheus metrics a Proctor process exports at /metrics: HTTP
// requests by route and status, sandboxes started, failed and live by provider and queue,
// attempt outcomes, model-step latency, and inference tokens and cost, beside the Go runtime's
// and the process's. A nil *Metrics records nothing, so that tests and callers without metrics
// need no checks.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one process's metrics.
type Metrics struct {
	reg              *prometheus.Registry
	httpRequests     *prometheus.CounterVec
	httpDuration     *prometheus.HistogramVec
	sandboxesStarted *prometheus.CounterVec
	sandboxesFailed  *prometheus.CounterVec
	attempts         *prometheus.CounterVec
	modelSteps       *prometheus.HistogramVec
	tokens           *prometheus.CounterVec
	cost             *prometheus.CounterVec

	temporalOnce sync.Once
	temporal     *sdkMetrics
}

// New makes a process's metrics, with the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "proctor_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status."}, []string{"route", "method", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "proctor_http_request_duration_seconds",
			Help: "Time to answer an HTTP request, by route pattern and method.", Buckets: prometheus.DefBuckets}, []string{"route", "method"}),
		sandboxesStarted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "proctor_sandboxes_started_total",
			Help: "Sandboxes started, by provider and task queue."}, []string{"provider", "queue"}),
		sandboxesFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "proctor_sandboxes_failed_total",
			Help: "Sandboxes that failed to start, by provider, task queue and reason (capacity, invalid, error)."}, []string{"provider", "queue", "reason"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "proctor_attempts_ended_total",
			Help: "Attempts that ended, by status (completed, error, cancelled)."}, []string{"status"}),
		modelSteps: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "proctor_model_step_seconds",
			Help: "Time a model took to answer one agent step, by model and outcome (ok, error).", Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}},
			[]string{"model", "status"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "proctor_inference_tokens_total",
			Help: "Tokens of recorded model calls, by model and kind (prompt, completion)."}, []string{"model", "kind"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "proctor_inference_cost_usd_total",
			Help: "Cost of recorded model calls in US dollars, by model."}, []string{"model"}),
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.httpRequests, m.httpDuration, m.sandboxesStarted, m.sandboxesFailed, m.attempts, m.modelSteps, m.tokens, m.cost)
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Register adds a collector of the caller's (a gauge read at scrape time, for instance).
func (m *Metrics) Register(c prometheus.Collector) {
	if m != nil {
		m.reg.MustRegister(c)
	}
}

// Request counts and times one answered HTTP request. route is the pattern it matched (so that
// ids do not make a label each); "" counts as "unmatched".
func (m *Metrics) Request(route, method string, status int, took time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route, method).Observe(took.Seconds())
}

// SandboxStarted counts a sandbox started on queue.
func (m *Metrics) SandboxStarted(provider, queue string) {
	if m != nil {
		m.sandboxesStarted.WithLabelValues(provider, queue).Inc()
	}
}

// SandboxFailed counts a sandbox that did not start, and why: capacity, invalid or error.
func (m *Metrics) SandboxFailed(provider, queue, reason string) {
	if m != nil {
		m.sandboxesFailed.WithLabelValues(provider, queue, reason).Inc()
	}
}

// AttemptEnded counts an attempt that ended with status.
func (m *Metrics) AttemptEnded(status string) {
	if m != nil {
		m.attempts.WithLabelValues(status).Inc()
	}
}

// ModelCall records one recorded model call: its latency and outcome, and, when it answered,
// its tokens and cost.
func (m *Metrics) ModelCall(model string, took time.Duration, ok bool, promptTokens, completionTokens int, costUSD float64) {
	if m == nil {
		return
	}
	status := "ok"
	if !ok {
		status = "error"
	}
	m.modelSteps.WithLabelValues(model, status).Observe(took.Seconds())
	if ok {
		m.tokens.WithLabelValues(model, "prompt").Add(float64(promptTokens))
		m.tokens.WithLabelValues(model, "completion").Add(float64(completionTokens))
		m.cost.WithLabelValues(model).Add(costUSD)
	}
}
