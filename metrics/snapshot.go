package metrics

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// Sample is one series in a snapshot: a value, or for histograms the count
// and sum (mean = sum/count) and the quantiles estimated from buckets.
type Sample struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
	Count  uint64            `json:"count,omitempty"`
	P50    float64           `json:"p50,omitempty"`
	P99    float64           `json:"p99,omitempty"`
}

// Snapshot gathers every shardfs_* series (the runtime's are left to
// Prometheus scrapes).
func (m *Metrics) Snapshot() ([]Sample, error) {
	families, err := m.reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gathering metrics: %w", err)
	}
	var out []Sample
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "shardfs_") && f.GetName() != "process_resident_memory_bytes" {
			continue
		}
		for _, metric := range f.GetMetric() {
			s := Sample{Name: f.GetName(), Labels: labels(metric)}
			switch {
			case metric.Counter != nil:
				s.Value = metric.Counter.GetValue()
			case metric.Gauge != nil:
				s.Value = metric.Gauge.GetValue()
			case metric.Histogram != nil:
				h := metric.Histogram
				s.Value, s.Count = h.GetSampleSum(), h.GetSampleCount()
				s.P50, s.P99 = quantile(h, 0.5), quantile(h, 0.99)
			}
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// JSON renders the snapshot for /.shardfs/stats.
func (m *Metrics) JSON() ([]byte, error) {
	s, err := m.Snapshot()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	return append(b, '\n'), err
}

func labels(m *dto.Metric) map[string]string {
	if len(m.GetLabel()) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// quantile estimates q from cumulative buckets: the upper bound of the
// first bucket holding the q-th observation (coarse, and says so by being
// a bucket bound).
func quantile(h *dto.Histogram, q float64) float64 {
	total := h.GetSampleCount()
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	for _, b := range h.GetBucket() {
		if b.GetCumulativeCount() > rank {
			return b.GetUpperBound()
		}
	}
	return h.GetBucket()[len(h.GetBucket())-1].GetUpperBound()
}
