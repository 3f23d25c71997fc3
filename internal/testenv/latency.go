package testenv

import (
	"slices"
	"testing"
	"time"
)

// MeasureAddedLatency measures what a path adds to a call's latency: it makes the call directly
// and through the path once each (to warm their connections), then alternately b.N times each,
// and reports both medians (direct_p50_ms and NAME_p50_ms) and the added latency at p50 and p99
// (added_p50_ms, added_p99_ms). A call that fails fails the benchmark.
func MeasureAddedLatency(b *testing.B, name string, direct, through func() error) {
	b.Helper()
	timed := func(call func() error) time.Duration {
		start := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	timed(direct)
	timed(through)
	var d, t []time.Duration
	b.ResetTimer()
	for range b.N {
		d = append(d, timed(direct))
		t = append(t, timed(through))
	}
	b.StopTimer()
	slices.Sort(d)
	slices.Sort(t)
	q := func(xs []time.Duration, at float64) float64 {
		return float64(xs[min(len(xs)-1, int(at*float64(len(xs))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(d, 0.5), "direct_p50_ms")
	b.ReportMetric(q(t, 0.5), name+"_p50_ms")
	b.ReportMetric(q(t, 0.5)-q(d, 0.5), "added_p50_ms")
	b.ReportMetric(q(t, 0.99)-q(d, 0.99), "added_p99_ms")
}
