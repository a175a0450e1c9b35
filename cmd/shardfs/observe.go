package main

import (
	"github.com/shardfs/shardfs/cache"
	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/listing"
	"github.com/shardfs/shardfs/metrics"
	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
	"github.com/shardfs/shardfs/tarindex"
)

// registerStoreMetrics exposes the backend's counters.
func registerStoreMetrics(m *metrics.Metrics, meter *store.Metered, retry *store.Retry) {
	c := &meter.C
	m.CounterFunc("shardfs_store_gets_total", "Ranged GETs sent to the store (each retry counts).", func() float64 { return float64(c.GETs.Load()) })
	m.CounterFunc("shardfs_store_bytes_total", "Bytes received from the store.", func() float64 { return float64(c.BytesRead.Load()) })
	m.CounterFunc("shardfs_store_errors_total", "Store requests that failed.", func() float64 { return float64(c.Errors.Load()) })
	m.CounterFunc("shardfs_store_cancelled_total", "Store requests abandoned because their reader went away (a handle closed, read-ahead dropped).", func() float64 { return float64(c.Cancelled.Load()) })
	m.CounterFunc("shardfs_store_get_seconds_total", "Summed latency of ranged GETs.", func() float64 { return float64(c.GETNanos.Load()) / 1e9 })
	m.CounterFunc("shardfs_store_lists_total", "Listings of the whole source (each retry counts).", func() float64 { return float64(c.Lists.Load()) })
	m.CounterFunc("shardfs_store_list_requests_total", "LIST requests (pages) the listings sent to the store.", func() float64 { return float64(c.ListRequests.Load()) })
	m.CounterFunc("shardfs_store_list_seconds_total", "Time spent listing the source.", func() float64 { return float64(c.ListNanos.Load()) / 1e9 })
	m.CounterFunc("shardfs_store_retries_total", "Requests retried after throttling, 5xx, resets or stalls.", func() float64 { return float64(retry.Retries()) })
}

// statsOf turns snapshot, a component's Stats method, into the maker of
// metric value functions: each reads one field of a fresh snapshot.
func statsOf[S any](snapshot func() S) func(field func(S) float64) func() float64 {
	return func(field func(S) float64) func() float64 {
		return func() float64 { return field(snapshot()) }
	}
}

// registerCacheMetrics exposes the cache's tiers and ring.
func registerCacheMetrics(m *metrics.Metrics, c *cache.Cache) {
	stat := statsOf(c.Stats)
	m.CounterFunc("shardfs_cache_ram_hits_total", "Reads served by the RAM tier.", stat(func(s cache.Stats) float64 { return float64(s.RAMHits) }))
	m.CounterFunc("shardfs_cache_ram_served_bytes_total", "Bytes the RAM tier handed to reads: the length copied, or a whole block to a read that keeps it (shardfs_read_bytes_total counts what readers got).", stat(func(s cache.Stats) float64 { return float64(s.RAMBytesServed) }))
	m.CounterFunc("shardfs_cache_ring_hits_total", "Reads served by the NVMe ring.", stat(func(s cache.Stats) float64 { return float64(s.RingHits) }))
	m.CounterFunc("shardfs_cache_ring_misses_total", "Reads the NVMe ring could not serve.", stat(func(s cache.Stats) float64 { return float64(s.RingMisses) }))
	m.CounterFunc("shardfs_cache_ring_served_bytes_total", "Bytes the NVMe ring handed to reads: the length copied, or a whole block to a read that keeps it (shardfs_read_bytes_total counts what readers got).", stat(func(s cache.Stats) float64 { return float64(s.RingBytesServed) }))
	m.CounterFunc("shardfs_cache_ring_read_bytes_total", "Bytes read from the NVMe ring's disk: whole blocks, read and checked, whatever part of them a reader wanted.", stat(func(s cache.Stats) float64 { return float64(s.RingBytesRead) }))
	m.GaugeFunc("shardfs_cache_ring_read_per_delivered_byte", "shardfs_cache_ring_read_bytes_total per byte of shardfs_read_bytes_total: 1 when each block read from the ring is delivered once, far more when small reads each read a whole block.", stat(func(s cache.Stats) float64 {
		if d := m.DeliveredBytes(); d > 0 {
			return float64(s.RingBytesRead) / float64(d)
		}
		return 0
	}))
	m.CounterFunc("shardfs_cache_ring_writes_total", "Blocks written into the ring.", stat(func(s cache.Stats) float64 { return float64(s.RingWrites) }))
	m.CounterFunc("shardfs_cache_evictions_total", "Valid ring blocks overwritten by the write head.", stat(func(s cache.Stats) float64 { return float64(s.Evictions) }))
	m.CounterFunc("shardfs_cache_checksum_failures_total", "Ring blocks dropped because their CRC32C did not match.", stat(func(s cache.Stats) float64 { return float64(s.ChecksumFailures) }))
	m.GaugeFunc("shardfs_cache_ring_bytes", "Bytes of valid blocks in the ring.", stat(func(s cache.Stats) float64 { return float64(s.RingBytes) }))
	m.GaugeFunc("shardfs_cache_ram_bytes", "Bytes held by the RAM tier.", stat(func(s cache.Stats) float64 { return float64(s.RAMBytes) }))
	m.GaugeFunc("shardfs_cache_leases", "Cache extent leases held by GPU clients.", stat(func(s cache.Stats) float64 { return float64(s.Leases) }))
	m.GaugeFunc("shardfs_cache_whole_files", "Complete shards held as whole files (CACHE_DIR/shards).", stat(func(s cache.Stats) float64 { return float64(s.WholeFiles) }))
	m.GaugeFunc("shardfs_cache_whole_bytes", "Bytes of the whole-shard files.", stat(func(s cache.Stats) float64 { return float64(s.WholeBytes) }))
	m.CounterFunc("shardfs_cache_whole_made_total", "Whole-shard files made of shards read whole or warmed.", stat(func(s cache.Stats) float64 { return float64(s.WholeMade) }))
	m.CounterFunc("shardfs_cache_whole_as_read_total", "Of the whole-shard files made, those written while their shards were read, not copied from the ring after.", stat(func(s cache.Stats) float64 { return float64(s.WholeAsRead) }))
	m.CounterFunc("shardfs_cache_whole_evictions_total", "Whole-shard files unlinked for room (open descriptors keep reading them).", stat(func(s cache.Stats) float64 { return float64(s.WholeEvictions) }))
	m.CounterFunc("shardfs_cache_whole_checks_total", "Whole-shard files read whole and CRC32C-checked before being handed out (a file's first open in the mount's life, and its first after it changed).", stat(func(s cache.Stats) float64 { return float64(s.WholeChecks) }))
	m.CounterFunc("shardfs_cache_whole_checksum_failures_total", "Whole-shard files dropped because their CRC32C did not match their journal record; their shards are read through the daemon.", stat(func(s cache.Stats) float64 { return float64(s.WholeCheckFails) }))
}

// registerPrefetchMetrics exposes read-ahead: what it fetched, what reads
// waited for, and how much of the budget it holds.
func registerPrefetchMetrics(m *metrics.Metrics, s *prefetch.Engine) {
	stat := statsOf(s.Stats)
	m.CounterFunc("shardfs_prefetch_fetched_bytes_total", "Bytes fetched by read-ahead parts.", stat(func(s prefetch.Stats) float64 { return float64(s.FetchedBytes) }))
	m.CounterFunc("shardfs_prefetch_cache_bytes_total", "Bytes read-ahead parts read from the disk cache instead of the store.", stat(func(s prefetch.Stats) float64 { return float64(s.CacheBytes) }))
	m.CounterFunc("shardfs_prefetch_cache_skipped_bytes_total", "Read-ahead bytes served but not written to the cache because its disk lagged the store (--cache-lag skip); the next pass caches them.", stat(func(s prefetch.Stats) float64 { return float64(s.SinkSkippedBytes) }))
	m.GaugeFunc("shardfs_prefetch_cache_fillers", "Open handles that fill the cache (shardfs warm through the mount); while any is open no block skips the cache.", stat(func(s prefetch.Stats) float64 { return float64(s.CacheFillers) }))
	m.CounterFunc("shardfs_prefetch_ahead_served_bytes_total", "Bytes served from parts fetched ahead of the read that needed them.", stat(func(s prefetch.Stats) float64 { return float64(s.PrefetchedServedBytes) }))
	m.CounterFunc("shardfs_prefetch_waits_total", "Reads that waited for bytes still on the network.", stat(func(s prefetch.Stats) float64 { return float64(s.Waits) }))
	m.CounterFunc("shardfs_prefetch_budget_waits_total", "Times a read waited for the memory budget (backpressure).", stat(func(s prefetch.Stats) float64 { return float64(s.BudgetWaits) }))
	m.GaugeFunc("shardfs_prefetch_read_pins", "Pins reads hold on read-ahead parts now; one that stays above 0 with no read running is a leak.", stat(func(s prefetch.Stats) float64 { return float64(s.ReadPins) }))
	m.GaugeFunc("shardfs_prefetch_budget_in_use_bytes", "Read-ahead budget held by parts in flight or not yet consumed.", stat(func(s prefetch.Stats) float64 { return float64(s.InUseBytes) }))
	m.GaugeFunc("shardfs_prefetch_budget_peak_bytes", "The most read-ahead budget ever held at once.", stat(func(s prefetch.Stats) float64 { return float64(s.PeakInUseBytes) }))
	m.GaugeFunc("shardfs_prefetch_streams", "Open read-ahead streams.", stat(func(s prefetch.Stats) float64 { return float64(s.Streams) }))
	m.GaugeFunc("shardfs_prefetch_gets_in_flight", "Read-ahead parts being fetched (or read from the disk cache) now.", stat(func(s prefetch.Stats) float64 { return float64(s.Running) }))
	m.GaugeFunc("shardfs_prefetch_gets_in_flight_peak", "The most read-ahead parts ever fetched at once.", stat(func(s prefetch.Stats) float64 { return float64(s.PeakRunning) }))
	m.CounterFunc("shardfs_prefetch_next_parts_total", "Parts prefetched from the next shards (by each process's stride of opens, or in listing order).", stat(func(s prefetch.Stats) float64 { return float64(s.NextParts) }))
	m.CounterFunc("shardfs_prefetch_next_missed_total", "Opens of another shard than the one their process's stride of opens named for next-shard prefetch.", stat(func(s prefetch.Stats) float64 { return float64(s.NextMissed) }))
	m.CounterFunc("shardfs_prefetch_next_found_total", "Opens that found their first part already fetched or in flight (next-shard prefetch).", stat(func(s prefetch.Stats) float64 { return float64(s.NextFound) }))
	m.CounterFunc("shardfs_prefetch_hint_parts_total", "Parts prefetched because a loader hinted the shard.", stat(func(s prefetch.Stats) float64 { return float64(s.HintParts) }))
	m.CounterFunc("shardfs_prefetch_hint_found_total", "Opens that found their first part already fetched or in flight (hints).", stat(func(s prefetch.Stats) float64 { return float64(s.HintFound) }))
	m.CounterFunc("shardfs_prefetch_cancelled_total", "Parts dropped before their GET finished.", stat(func(s prefetch.Stats) float64 { return float64(s.Cancelled) }))
	m.CounterFunc("shardfs_prefetch_evicted_total", "Prefetched parts dropped to make room for another read.", stat(func(s prefetch.Stats) float64 { return float64(s.Evicted) }))
	m.CounterFunc("shardfs_prefetch_exact_reads_total", "Random reads of objects larger than the whole cache fetched with a GET of their own bytes, cached nowhere: their blocks would be pushed out before the blocks' other reads came.", stat(func(s prefetch.Stats) float64 { return float64(s.ExactReads) }))
	m.CounterFunc("shardfs_prefetch_chunk_reads_total", "Parts made for random reads of objects larger than the whole cache that run on to the end of their chunk, an earlier read having landed there; their blocks are handed to the page cache as they arrive.", stat(func(s prefetch.Stats) float64 { return float64(s.ChunkReads) }))
	m.CounterFunc("shardfs_prefetch_dense_objects_total", "Objects random reads used densely (a map-style epoch), whose rest was then fetched in the background.", stat(func(s prefetch.Stats) float64 { return float64(s.DenseObjects) }))
	m.CounterFunc("shardfs_prefetch_dense_parts_total", "Background parts fetched (or read from the ring) for objects read densely.", stat(func(s prefetch.Stats) float64 { return float64(s.DenseParts) }))
	m.CounterFunc("shardfs_prefetch_schedule_ranges_total", "Ranges of loaders' sample schedules queued.", stat(func(s prefetch.Stats) float64 { return float64(s.ScheduledRanges) }))
	m.CounterFunc("shardfs_prefetch_schedule_parts_total", "Parts fetched (or read from the disk cache) for sample schedules.", stat(func(s prefetch.Stats) float64 { return float64(s.ScheduleParts) }))
	m.CounterFunc("shardfs_prefetch_schedule_read_total", "Scheduled ranges a read reached while a part kept them.", stat(func(s prefetch.Stats) float64 { return float64(s.ScheduleRead) }))
	m.CounterFunc("shardfs_prefetch_schedule_skipped_total", "Scheduled ranges dropped because their reader had gone past them.", stat(func(s prefetch.Stats) float64 { return float64(s.ScheduleSkipped) }))
	m.GaugeFunc("shardfs_prefetch_schedule_queued", "Scheduled ranges queued now, their parts not yet made.", stat(func(s prefetch.Stats) float64 { return float64(s.ScheduleQueued) }))
	m.GaugeFunc("shardfs_prefetch_schedule_in_use_bytes", "Read-ahead budget held now by parts made for sample schedules (at most half the budget).", stat(func(s prefetch.Stats) float64 { return float64(s.ScheduleInUseBytes) }))
	for i, name := range prefetch.PurposeNames() {
		m.CounterFuncLabelled("shardfs_prefetch_unread_bytes_total", "Bytes fetched from the store into parts let go with no read of them, by the part's purpose: read-ahead a reader never reached, guesses never opened, evictions (bytes a cache tier kept included).",
			map[string]string{"purpose": name}, stat(func(s prefetch.Stats) float64 { return float64(s.Unread[i]) }))
	}
	m.CounterFunc("shardfs_prefetch_evicted_unread_bytes_total", "Of the unread bytes, those eviction let go: fetched, then thrown away for room while their readers still read.", stat(func(s prefetch.Stats) float64 { return float64(s.EvictedUnread) }))
	m.CounterFunc("shardfs_prefetch_errors_total", "Read-ahead GETs that failed.", stat(func(s prefetch.Stats) float64 { return float64(s.Errors) }))
}

// registerHintMetrics exposes what the hints file was sent.
func registerHintMetrics(m *metrics.Metrics, root *shardfs.Root) {
	m.CounterFunc("shardfs_hint_lines_total", "Hints lines that named a file of the mount.", func() float64 { return float64(root.HintStats().Lines) })
	m.CounterFunc("shardfs_hint_unknown_lines_total", "Hints lines that named no file of the mount (logged once per 10 s).", func() float64 { return float64(root.HintStats().Unknown) })
	m.CounterFunc("shardfs_hint_range_lines_total", "PATH OFFSET LENGTH hints lines passed to the sample schedule.", func() float64 { return float64(root.HintStats().Ranges) })
	m.CounterFunc("shardfs_hint_past_eof_lines_total", "Hint ranges reaching past the end of their file (clipped; dropped when they start there).", func() float64 { return float64(root.HintStats().PastEOF) })
	m.CounterFunc("shardfs_hint_huge_lines_total", "Hint ranges longer than 256 MiB (dropped).", func() float64 { return float64(root.HintStats().Huge) })
	m.CounterFunc("shardfs_hint_garbage_lines_total", "Hints lines neither a path nor PATH OFFSET LENGTH (dropped).", func() float64 { return float64(root.HintStats().Garbage) })
	m.CounterFunc("shardfs_hint_overlapping_lines_total", "Hint ranges overlapping the same writer's previous range (only new bytes kept).", func() float64 { return float64(root.HintStats().Overlapping) })
	m.CounterFunc("shardfs_hint_full_lines_total", "Hint ranges refused because the schedule held its cap (65536 ranges).", func() float64 { return float64(root.HintStats().Full) })
	m.CounterFunc("shardfs_hint_refused_writes_total", "Writes to the hints file refused with E2BIG: a line longer than 4096 bytes.", func() float64 { return float64(root.HintStats().Refused) })
}

// registerOpenMetrics exposes how opens of shards are served.
func registerOpenMetrics(m *metrics.Metrics, root *shardfs.Root) {
	m.GaugeFunc("shardfs_passthrough", "1 when opens of shards held whole are passed to the kernel (asked for, and allowed by the mount's probe).", func() float64 {
		if root.Passthrough() {
			return 1
		}
		return 0
	})
	m.CounterFunc("shardfs_passthrough_opens_total", "Opens of shards passed through to the kernel, which reads their whole-shard file itself.", func() float64 { p, _ := root.OpenStats(); return float64(p) })
	m.GaugeFunc("shardfs_open_shards", "Shard handles open now (the kernel has not released them).", func() float64 { return float64(root.OpenShards()) })
	m.CounterFunc("shardfs_daemon_opens_total", "Opens of shards whose reads the daemon serves.", func() float64 { _, d := root.OpenStats(); return float64(d) })
	fills := statsOf(root.FillStats)
	m.CounterFunc("shardfs_page_cache_fills_queued_total", "Blocks queued for the filler after a small random read landed in them; each ends filled or failed.", fills(func(s shardfs.FillStats) float64 { return float64(s.Queued) }))
	m.CounterFunc("shardfs_page_cache_fills_total", "Blocks handed whole to the kernel's page cache after a random read landed in them (cached blocks, or a chunk fetched with the read); their other reads never reach the daemon.", fills(func(s shardfs.FillStats) float64 { return float64(s.Blocks) }))
	m.CounterFunc("shardfs_page_cache_fill_bytes_total", "Bytes of the blocks handed to the kernel's page cache.", fills(func(s shardfs.FillStats) float64 { return float64(s.Bytes) }))
	m.CounterFunc("shardfs_page_cache_fills_dropped_total", "Fills not made because the fill queue was full (the reads went to the daemon).", fills(func(s shardfs.FillStats) float64 { return float64(s.Dropped) }))
	m.CounterFunc("shardfs_page_cache_fills_failed_total", "Fills not made because neither the cache nor a chunk's part held the block whole when the filler came to it (a later read may offer it again) or the kernel refused it.", fills(func(s shardfs.FillStats) float64 { return float64(s.Failed) }))
}

// registerIndexMetrics exposes where member indexes came from.
func registerIndexMetrics(m *metrics.Metrics, x *tarindex.Index) {
	stat := statsOf(x.Stats)
	m.CounterFunc("shardfs_index_memory_hits_total", "Member index reads served from memory.", stat(func(s tarindex.Stats) float64 { return float64(s.Memory) }))
	m.CounterFunc("shardfs_index_persisted_total", "Member indexes read from the cache dir, with no store read.", stat(func(s tarindex.Stats) float64 { return float64(s.Persisted) }))
	m.CounterFunc("shardfs_index_sidecars_total", "Member indexes taken from a sidecar index (wds2idx .idx) after its check.", stat(func(s tarindex.Stats) float64 { return float64(s.Sidecars) }))
	m.CounterFunc("shardfs_index_scans_total", "Member indexes built by reading the shard's tar headers.", stat(func(s tarindex.Stats) float64 { return float64(s.Scans) }))
	m.CounterFunc("shardfs_index_sidecars_rejected_total", "Sidecar indexes that disagreed with their shard and were ignored (each logged).", stat(func(s tarindex.Stats) float64 { return float64(s.SidecarsRejected) }))
	m.CounterFunc("shardfs_index_persisted_corrupt_total", "Persisted member indexes that failed their checksum and were built again (each logged).", stat(func(s tarindex.Stats) float64 { return float64(s.PersistedCorrupt) }))
	m.CounterFunc("shardfs_index_persist_failures_total", "Member indexes that could not be written to the cache dir.", stat(func(s tarindex.Stats) float64 { return float64(s.PersistFailures) }))
	m.GaugeFunc("shardfs_index_memory_bytes", "Bytes of member indexes held in memory (at most "+formatSize(tarindex.DefaultMemory)+").", stat(func(s tarindex.Stats) float64 { return float64(s.MemoryBytes) }))
}

// mountListing is what the mount's first listing cost the store.
type mountListing struct {
	requests int64
	seconds  float64
}

func listingAtMount(meter *store.Metered) mountListing {
	return mountListing{requests: meter.C.ListRequests.Load(), seconds: float64(meter.C.ListNanos.Load()) / 1e9}
}

// registerListingMetrics exposes where the listing came from, what the
// mount's listing cost and what the refreshes found.
func registerListingMetrics(m *metrics.Metrics, l *listing.Listing, atMount mountListing) {
	stat := statsOf(l.Stats)
	fromCache := 0.0
	if l.Origin() == listing.FromCache {
		fromCache = 1
	}
	m.GaugeFunc("shardfs_metadata_mount_list_requests", "LIST requests the mount's first listing sent (0 when it came from the cache dir or a manifest).", func() float64 { return float64(atMount.requests) })
	m.GaugeFunc("shardfs_metadata_mount_list_seconds", "Time the mount's first listing spent listing the store.", func() float64 { return atMount.seconds })
	m.GaugeFunc("shardfs_metadata_from_cache", "1 when the mount's listing was the copy persisted in the cache dir.", func() float64 { return fromCache })
	m.GaugeFunc("shardfs_metadata_objects", "Objects in the listing that stands.", stat(func(s listing.Stats) float64 { return float64(s.Objects) }))
	m.GaugeFunc("shardfs_metadata_age_seconds", "Age of the listing that stands.", stat(func(s listing.Stats) float64 { return s.Age.Seconds() }))
	m.CounterFunc("shardfs_metadata_refreshes_total", "Background refreshes of the listing that succeeded.", stat(func(s listing.Stats) float64 { return float64(s.Refreshes) }))
	m.CounterFunc("shardfs_metadata_refresh_failures_total", "Background refreshes that failed; the listing that stood was kept.", stat(func(s listing.Stats) float64 { return float64(s.Failures) }))
	m.CounterFunc("shardfs_metadata_added_total", "Objects refreshes found new.", stat(func(s listing.Stats) float64 { return float64(s.Added) }))
	m.CounterFunc("shardfs_metadata_removed_total", "Objects refreshes found gone.", stat(func(s listing.Stats) float64 { return float64(s.Removed) }))
	m.CounterFunc("shardfs_metadata_changed_total", "Objects refreshes found with a new ETag or size.", stat(func(s listing.Stats) float64 { return float64(s.Changed) }))
}
