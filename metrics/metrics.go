// Package metrics owns the figures an operator reads: one Prometheus
// registry that the --metrics-addr endpoint serves, that /.shardfs/stats
// renders as JSON, and that `shardfs stats` prints as a table. Keeping one
// registry means the three can never disagree.
//
// The read path reports each read here (which tier served it, how long it
// took, how long it waited on the network); the other packages' counters
// are read through functions at scrape time, so they keep their own cheap
// atomics and never import Prometheus.
//
// This package never decides anything; it only counts.
package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Tiers a read can be served from.
const (
	TierCache   = "cache"   // RAM tier or NVMe ring
	TierNetwork = "network" // prefetch stream or plain GET: the read waited on the store
)

// Metrics is one mount's registry.
type Metrics struct {
	reg         *prometheus.Registry
	readSeconds *prometheus.HistogramVec
	readBytes   *prometheus.CounterVec
	readErrors  prometheus.Counter
	networkWait prometheus.Counter
	delivered   atomic.Int64 // bytes returned to readers, every tier
}

// New makes a registry with the read-path metrics and the Go runtime's.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		readSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shardfs_read_seconds",
			Help:    "Latency of FUSE reads, by the tier that served them.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 4, 10), // 50µs .. 13s
		}, []string{"tier"}),
		readBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardfs_read_bytes_total",
			Help: "Bytes returned to readers, by the tier that served them.",
		}, []string{"tier"}),
		readErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shardfs_read_errors_total",
			Help: "Reads that failed (EIO or EINTR).",
		}),
		networkWait: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shardfs_read_network_wait_seconds_total",
			Help: "Time reads spent waiting on the object store: the time a GPU starves.",
		}),
	}
	m.reg.MustRegister(m.readSeconds, m.readBytes, m.readErrors, m.networkWait,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, tier := range []string{TierCache, TierNetwork} {
		m.readBytes.WithLabelValues(tier)
		m.readSeconds.WithLabelValues(tier)
	}
	return m
}

// ObserveRead records one read.
func (m *Metrics) ObserveRead(tier string, n int, d time.Duration, err error) {
	m.readSeconds.WithLabelValues(tier).Observe(d.Seconds())
	m.readBytes.WithLabelValues(tier).Add(float64(n))
	m.delivered.Add(int64(n))
	if tier == TierNetwork {
		m.networkWait.Add(d.Seconds())
	}
	if err != nil {
		m.readErrors.Inc()
	}
}

// DeliveredBytes is the sum of shardfs_read_bytes_total over the tiers:
// what readers were given, the denominator of a cost per byte delivered.
func (m *Metrics) DeliveredBytes() int64 { return m.delivered.Load() }

// CounterFunc exposes a monotonically increasing figure read at scrape.
func (m *Metrics) CounterFunc(name, help string, f func() float64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
}

// CounterFuncLabelled is CounterFunc for one series of a family told apart
// by constant labels: each series registers with its own labels.
func (m *Metrics) CounterFuncLabelled(name, help string, labels map[string]string, f func() float64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, f))
}

// GaugeFunc exposes a figure that goes up and down, read at scrape.
func (m *Metrics) GaugeFunc(name, help string, f func() float64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// Registry is the underlying registry, for the HTTP handler.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }
