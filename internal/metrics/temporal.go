package metrics

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// Temporal is a handler for the Temporal SDK's own metrics (requests to the server, polls,
// workflow and activity task latencies, …), exported beside Proctor's: counters as counters,
// gauges as gauges, timers as histograms in seconds (name_seconds). The SDK tags the same metric
// differently at different call sites; each family carries the union of its tags, empty where a
// series lacks one.
func (m *Metrics) Temporal() client.MetricsHandler {
	if m == nil {
		return nil
	}
	m.temporalOnce.Do(func() {
		m.temporal = &sdkMetrics{families: map[string]*sdkFamily{}}
		m.reg.MustRegister(m.temporal)
	})
	return sdkHandler{m: m.temporal}
}

const (
	sdkCounter = iota
	sdkGauge
	sdkTimer
)

// timerBuckets are the upper bounds, in seconds, of the SDK's timers.
var timerBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

type sdkMetrics struct {
	mu       sync.Mutex
	families map[string]*sdkFamily
}

type sdkFamily struct {
	kind   int
	keys   map[string]bool
	series map[string]*sdkSeries
}

type sdkSeries struct {
	labels  map[string]string
	value   float64 // a counter's total or a gauge's last value
	count   uint64  // a timer's observations
	sum     float64
	buckets []uint64
}

// series finds (or makes) the series of a metric with the given tags.
func (s *sdkMetrics) series(kind int, name string, tags map[string]string) *sdkSeries {
	name = promName(name)
	if kind == sdkTimer {
		name += "_seconds"
	}
	f := s.families[name]
	if f == nil {
		f = &sdkFamily{kind: kind, keys: map[string]bool{}, series: map[string]*sdkSeries{}}
		s.families[name] = f
	}
	labels := make(map[string]string, len(tags))
	for k, v := range tags {
		k = promName(k)
		labels[k] = v
		f.keys[k] = true
	}
	var key strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		key.WriteString(k + "=" + labels[k] + "\xff")
	}
	se := f.series[key.String()]
	if se == nil {
		se = &sdkSeries{labels: labels}
		if kind == sdkTimer {
			se.buckets = make([]uint64, len(timerBuckets))
		}
		f.series[key.String()] = se
	}
	return se
}

// Describe describes nothing: the families appear as the SDK uses them (an unchecked collector).
func (s *sdkMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect reports every series, each family with the union of its labels.
func (s *sdkMetrics) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, f := range s.families {
		keys := slices.Sorted(maps.Keys(f.keys))
		desc := prometheus.NewDesc(name, "Temporal SDK metric "+name+".", keys, nil)
		for _, se := range f.series {
			values := make([]string, len(keys))
			for i, k := range keys {
				values[i] = se.labels[k]
			}
			switch f.kind {
			case sdkCounter:
				ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, se.value, values...)
			case sdkGauge:
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, se.value, values...)
			case sdkTimer:
				buckets := make(map[float64]uint64, len(timerBuckets))
				var cum uint64
				for i, b := range timerBuckets {
					cum += se.buckets[i]
					buckets[b] = cum
				}
				ch <- prometheus.MustNewConstHistogram(desc, se.count, se.sum, buckets, values...)
			}
		}
	}
}

// promName makes a Prometheus-safe name: letters, digits and underscores.
func promName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

type sdkHandler struct {
	m    *sdkMetrics
	tags map[string]string
}

func (h sdkHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(h.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return sdkHandler{m: h.m, tags: merged}
}

func (h sdkHandler) Counter(name string) client.MetricsCounter {
	return sdkInstrument{h.m, name, h.tags}
}

func (h sdkHandler) Gauge(name string) client.MetricsGauge { return sdkInstrument{h.m, name, h.tags} }

func (h sdkHandler) Timer(name string) client.MetricsTimer { return sdkInstrument{h.m, name, h.tags} }

// sdkInstrument is one named, tagged metric; the SDK uses it as a counter, a gauge or a timer.
type sdkInstrument struct {
	m    *sdkMetrics
	name string
	tags map[string]string
}

// Inc adds to a counter.
func (i sdkInstrument) Inc(n int64) {
	i.m.mu.Lock()
	defer i.m.mu.Unlock()
	i.m.series(sdkCounter, i.name, i.tags).value += float64(n)
}

// Update sets a gauge.
func (i sdkInstrument) Update(v float64) {
	i.m.mu.Lock()
	defer i.m.mu.Unlock()
	i.m.series(sdkGauge, i.name, i.tags).value = v
}

// Record observes a timer's duration.
func (i sdkInstrument) Record(d time.Duration) {
	i.m.mu.Lock()
	defer i.m.mu.Unlock()
	se := i.m.series(sdkTimer, i.name, i.tags)
	s := d.Seconds()
	se.count++
	se.sum += s
	for b, upper := range timerBuckets {
		if s <= upper {
			se.buckets[b]++
			break
		}
	}
}
