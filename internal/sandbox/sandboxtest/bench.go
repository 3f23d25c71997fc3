package sandboxtest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/proctorhq/proctor/internal/sandbox"
)

// BenchmarkMCPReady measures, per iteration, starting an MCP server from spec (without ID) in p
// until an MCP session is initialized, then stopping it; it reports the medians as ready-ms and
// stop-ms, and the 99th percentile of ready as ready-p99-ms.
func BenchmarkMCPReady(b *testing.B, p sandbox.Provider, spec sandbox.Spec) {
	var ready, stop []time.Duration
	for i := 0; b.Loop(); i++ {
		spec.ID = fmt.Sprint("bench-", i)
		begin := time.Now()
		sb, err := p.Start(b.Context(), spec)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
		session, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).
			Connect(ctx, &mcp.IOTransport{Reader: sb.Stdout(), Writer: sb.Stdin()}, nil)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		ready = append(ready, time.Since(begin))
		session.Close()
		begin = time.Now()
		if err := sb.Stop(b.Context()); err != nil {
			b.Fatal(err)
		}
		stop = append(stop, time.Since(begin))
	}
	// The q-quantile (nearest rank) in milliseconds.
	quantile := func(d []time.Duration, q float64) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(quantile(ready, 0.5), "ready-ms")
	b.ReportMetric(quantile(ready, 0.99), "ready-p99-ms")
	b.ReportMetric(quantile(stop, 0.5), "stop-ms")
}
