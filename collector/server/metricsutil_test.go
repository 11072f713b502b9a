package server

import (
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The helpers below read metric values as prometheus/testutil does
// (ToFloat64, CollectAndCount, a gathered family), without its extra
// module dependency.

// metricValue is the value of a collector that holds exactly one series
// (a counter, a gauge, one child of a vector).
func metricValue(t testing.TB, c prometheus.Collector) float64 {
	t.Helper()
	ms := collect(t, c)
	if len(ms) != 1 {
		t.Fatalf("collector has %d series, want 1", len(ms))
	}
	m := ms[0]
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	t.Fatalf("metric %v is neither a counter nor a gauge", m)
	return 0
}

// histogramCount is the number of observations of a histogram.
func histogramCount(t testing.TB, h prometheus.Histogram) uint64 {
	t.Helper()
	ms := collect(t, h)
	if len(ms) != 1 || ms[0].Histogram == nil {
		t.Fatalf("not one histogram: %v", ms)
	}
	return ms[0].Histogram.GetSampleCount()
}

// seriesCount is the number of series a collector holds.
func seriesCount(t testing.TB, c prometheus.Collector) int {
	t.Helper()
	return len(collect(t, c))
}

func collect(t testing.TB, c prometheus.Collector) []*dto.Metric {
	t.Helper()
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var out []*dto.Metric
	for m := range ch {
		pb := &dto.Metric{}
		if err := m.Write(pb); err != nil {
			t.Fatal(err)
		}
		out = append(out, pb)
	}
	return out
}

// gathered is a family gathered from reg, as "label=value,..." → value,
// with its help text; nil when reg has no such family.
func gathered(t testing.TB, reg prometheus.Gatherer, name string) (help string, series map[string]float64) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		series = map[string]float64{}
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			series[strings.Join(labels, ",")] = v
		}
		return f.GetHelp(), series
	}
	return "", nil
}
