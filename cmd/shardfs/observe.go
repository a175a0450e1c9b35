package main

import (
	"github.com/shardfs/shardfs/cache"
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

// registerCacheMetrics exposes the cache's tiers and ring.
func registerCacheMetrics(m *metrics.Metrics, c *cache.Cache) {
	stat := func(f func(cache.Stats) float64) func() float64 {
		return func() float64 { return f(c.Stats()) }
	}
	m.CounterFunc("shardfs_cache_ram_hits_total", "Reads served by the RAM tier.", stat(func(s cache.Stats) float64 { return float64(s.RAMHits) }))
	m.CounterFunc("shardfs_cache_ram_served_bytes_total", "Bytes served by the RAM tier.", stat(func(s cache.Stats) float64 { return float64(s.RAMBytesServed) }))
	m.CounterFunc("shardfs_cache_ring_hits_total", "Reads served by the NVMe ring.", stat(func(s cache.Stats) float64 { return float64(s.RingHits) }))
	m.CounterFunc("shardfs_cache_ring_misses_total", "Reads the NVMe ring could not serve.", stat(func(s cache.Stats) float64 { return float64(s.RingMisses) }))
	m.CounterFunc("shardfs_cache_ring_served_bytes_total", "Bytes served by the NVMe ring.", stat(func(s cache.Stats) float64 { return float64(s.RingBytesServed) }))
	m.CounterFunc("shardfs_cache_ring_writes_total", "Blocks written into the ring.", stat(func(s cache.Stats) float64 { return float64(s.RingWrites) }))
	m.CounterFunc("shardfs_cache_evictions_total", "Valid ring blocks overwritten by the write head.", stat(func(s cache.Stats) float64 { return float64(s.Evictions) }))
	m.CounterFunc("shardfs_cache_checksum_failures_total", "Ring blocks dropped because their CRC32C did not match.", stat(func(s cache.Stats) float64 { return float64(s.ChecksumFailures) }))
	m.GaugeFunc("shardfs_cache_ring_bytes", "Bytes of valid blocks in the ring.", stat(func(s cache.Stats) float64 { return float64(s.RingBytes) }))
	m.GaugeFunc("shardfs_cache_ram_bytes", "Bytes held by the RAM tier.", stat(func(s cache.Stats) float64 { return float64(s.RAMBytes) }))
	m.GaugeFunc("shardfs_cache_leases", "Cache extent leases held by GPU clients.", stat(func(s cache.Stats) float64 { return float64(s.Leases) }))
}
