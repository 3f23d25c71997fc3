// Package tracing exports OpenTelemetry traces over OTLP (gRPC) when an endpoint is configured:
// the API server's requests, the workflows they start and every activity those run share one
// trace (the Temporal SDK's interceptor carries the context in workflow and activity headers).
// It also gives logs the ids that tie a line to its trace, workflow and activity.
//
// The only OpenTelemetry global set here is the error handler: each process passes its provider
// to what it instruments, so two instances in one process (as in tests) never mix their spans.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.temporal.io/sdk/activity"
	otelinterceptor "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// Propagator reads and writes W3C trace context (traceparent, tracestate) and baggage.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Provider is one process's tracer provider. A nil *Provider traces nothing.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Start exports spans to the OTLP/gRPC collector at endpoint, a URL: http://host:4317 sends in
// the clear, https://host:4317 over TLS. The batch processor's settings come from the standard
// OTEL_BSP_* variables. role names the process in the spans' resource (server, worker, dev).
// An empty endpoint returns nil: no tracing. Export failures (a collector that is down) are
// logged to log as warnings.
func Start(ctx context.Context, endpoint, role, version string, log *slog.Logger) (*Provider, error) {
	if endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--otlp-endpoint %q: want a URL such as http://otel-collector:4317 (http: plaintext, https: TLS)", endpoint)
	}
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	// The SDK reports its errors to one process-wide handler.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("opentelemetry", "error", err) }))
	host, _ := os.Hostname()
	res := resource.NewSchemaless(
		attribute.String("service.name", "proctor"),
		attribute.String("service.version", version),
		attribute.String("service.instance.id", fmt.Sprintf("%s/%d", host, os.Getpid())),
		attribute.String("host.name", host),
		attribute.String("proctor.role", role),
	)
	return &Provider{tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// TracerProvider is what instrumentation takes; a no-op one when tracing is off.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return noop.NewTracerProvider()
	}
	return p.tp
}

// TemporalInterceptor traces workflow starts, workflows, child workflows, activities and
// signals, continuing the trace in the caller's context. Nil when tracing is off.
func (p *Provider) TemporalInterceptor() (interceptor.Interceptor, error) {
	if p == nil {
		return nil, nil
	}
	return otelinterceptor.NewTracingInterceptor(otelinterceptor.TracerOptions{
		Tracer:            p.tp.Tracer("github.com/proctorhq/proctor/temporal"),
		TextMapPropagator: Propagator,
	})
}

// Shutdown exports what is buffered and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// LogHandler adds to every record logged with a context the ids that context carries: trace_id
// and span_id of its span, and workflow_id, run_id and activity when it is an activity's, with
// the job_id of a run list's activities and the attempt_id (a Proctor trace id) of a rollout's.
func LogHandler(h slog.Handler) slog.Handler { return &logHandler{h} }

type logHandler struct{ slog.Handler }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		id := info.WorkflowExecution.ID
		r.AddAttrs(slog.String("workflow_id", id), slog.String("run_id", info.WorkflowExecution.RunID),
			slog.String("activity", info.ActivityType.Name))
		// A job's run list is runlist/<job id>, an attempt's rollout rollout/<trace id>.
		if job, ok := strings.CutPrefix(id, "runlist/"); ok {
			r.AddAttrs(slog.String("job_id", job))
		} else if attempt, ok := strings.CutPrefix(id, "rollout/"); ok {
			r.AddAttrs(slog.String("attempt_id", attempt))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{h.Handler.WithAttrs(as)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{h.Handler.WithGroup(name)}
}
