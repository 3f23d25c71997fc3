package main

import (
	"context"
	"encoding/hex"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// otlpReceiver is an in-process OpenTelemetry collector: it takes OTLP/gRPC trace exports and
// keeps every span, with the proctor.role of the process that sent it.
type otlpReceiver struct {
	collectorpb.UnimplementedTraceServiceServer
	addr  string
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	role                      string
	name                      string
	traceID, spanID, parentID string
	kind                      tracepb.Span_SpanKind
	attrs                     map[string]string
}

func startOTLPReceiver(t testing.TB) *otlpReceiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{addr: l.Addr().String()}
	srv := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return r
}

func (r *otlpReceiver) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		role := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "proctor.role" {
				role = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				attrs := map[string]string{}
				for _, kv := range s.GetAttributes() {
					switch v := kv.GetValue().GetValue().(type) {
					case *commonpb.AnyValue_StringValue:
						attrs[kv.GetKey()] = v.StringValue
					case *commonpb.AnyValue_IntValue:
						attrs[kv.GetKey()] = strconv.FormatInt(v.IntValue, 10)
					}
				}
				r.spans = append(r.spans, receivedSpan{role: role, name: s.GetName(), kind: s.GetKind(), attrs: attrs,
					traceID: hex.EncodeToString(s.GetTraceId()), spanID: hex.EncodeToString(s.GetSpanId()), parentID: hex.EncodeToString(s.GetParentSpanId())})
			}
		}
	}
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// trace returns the spans of one trace, ordered by name.
func (r *otlpReceiver) trace(traceID string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if s.traceID == traceID {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// all returns every span received.
func (r *otlpReceiver) all() []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}
