package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/proctorhq/proctor/httpapi"
	"github.com/proctorhq/proctor/internal/config"
	"github.com/proctorhq/proctor/internal/metrics"
	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/internal/tracing"
	ptemporal "github.com/proctorhq/proctor/temporal"
)

// telemetry is what a long-running process reports to: its Prometheus metrics, and its traces
// when --otlp-endpoint names a collector.
type telemetry struct {
	metrics *metrics.Metrics
	tracing *tracing.Provider
}

func startTelemetry(ctx context.Context, cfg *config.Config, role string, log *slog.Logger) (*telemetry, error) {
	tp, err := tracing.Start(ctx, cfg.OTLPEndpoint, role, versionString(), log)
	if err != nil {
		return nil, err
	}
	return &telemetry{metrics: metrics.New(), tracing: tp}, nil
}

// dial connects to Temporal with the SDK's metrics and the tracing interceptor, so workflows
// and activities continue the trace of what started them.
func (t *telemetry) dial(ctx context.Context, address string, cfg *config.Config, keys *secrets.Keyring, log *slog.Logger) (*ptemporal.Client, error) {
	ic, err := t.tracing.TemporalInterceptor()
	if err != nil {
		return nil, err
	}
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tc, err := ptemporal.DialObserved(dialCtx, address, cfg.TemporalNamespace, log, sealerOf(keys), ptemporal.Observe{Metrics: t.metrics.Temporal(), Tracing: ic})
	if err != nil {
		return nil, err
	}
	tc.MaxTries, tc.StepsPerRun = cfg.MaxTries, cfg.StepsPerRun
	return tc, nil
}

// stop exports the spans still buffered, within timeout.
func (t *telemetry) stop(timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := t.tracing.Shutdown(ctx); err != nil {
		log.Warn("export the last spans", "error", err)
	}
}

// serveMetrics serves m at /metrics on addr, with the API's HTTP limits, until the returned
// server is shut down; with a token, only to requests that carry it as their bearer token.
func serveMetrics(addr, token string, m *metrics.Metrics, lim httpLimits, log *slog.Logger) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, busy("the metrics listener", addr, "--metrics-addr (or PROCTOR_METRICS_ADDR)", err)
	}
	mux := http.NewServeMux()
	h := m.Handler()
	if token != "" {
		h = httpapi.BearerOnly(token, h)
	}
	mux.Handle("GET /metrics", h)
	// A liveness probe for the worker: it answers while the process serves, as the API's does.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(httpapi.HealthBody{Status: "ok"}) //nolint:errcheck // the client went away
	})
	hs := serveHTTP(ln, mux, lim, log)
	log.Info("serving metrics", "url", "http://"+hs.addr+"/metrics")
	return hs, nil
}
