package main

import (
	"github.com/shardfs/shardfs/metrics"
	"github.com/shardfs/shardfs/store"
)

// registerStoreMetrics exposes the backend's counters.
func registerStoreMetrics(m *metrics.Metrics, meter *store.Metered, retry *store.Retry) {
	c := &meter.C
	m.CounterFunc("shardfs_store_gets_total", "Ranged GETs sent to the store (each retry counts).", func() float64 { return float64(c.GETs.Load()) })
	m.CounterFunc("shardfs_store_bytes_total", "Bytes received from the store.", func() float64 { return float64(c.BytesRead.Load()) })
	m.CounterFunc("shardfs_store_errors_total", "Store requests that failed.", func() float64 { return float64(c.Errors.Load()) })
	m.CounterFunc("shardfs_store_get_seconds_total", "Summed latency of ranged GETs.", func() float64 { return float64(c.GETNanos.Load()) / 1e9 })
	m.CounterFunc("shardfs_store_lists_total", "LIST requests sent to the store.", func() float64 { return float64(c.Lists.Load()) })
	m.CounterFunc("shardfs_store_retries_total", "Requests retried after throttling, 5xx, resets or stalls.", func() float64 { return float64(retry.Retries()) })
}
