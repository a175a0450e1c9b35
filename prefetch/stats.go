package prefetch

// Stats are the engine's counters, for /.shardfs/stats and metrics, in one
// group per owner: each owner counts its own group, and Engine.Stats puts
// them together with the gauges of now. Byte and part counts are totals
// since NewEngine; the gauges are current.
type Stats struct {
	ReadStats
	GetStats
	ScheduleStats
	NextStats
	DenseStats

	// Gauges.
	InUseBytes         int64 // budget held now by parts in flight or fetched and not yet consumed
	Streams            int64 // open streams
	CacheFillers       int64 // open readers that fill the cache (Reader.FillCache): no block skips it while any is
	Running            int64 // parts being fetched (or read from the cache) now
	ScheduleQueued     int64 // ranges queued now or kept by parts until read (at most MaxScheduledRanges)
	ScheduleInUseBytes int64 // budget held now by parts made for schedules
}

// ReadStats are counted by the engine: reads, parts, the budget and
// eviction.
type ReadStats struct {
	ServedBytes           int64 // bytes returned by ReadAt
	PrefetchedServedBytes int64 // of ServedBytes, bytes from parts fetched ahead of the read that needed them
	Waits                 int64 // reads that waited for bytes still on the network
	WaitNanos             int64 // total time those reads waited
	BudgetWaits           int64 // times a read waited for memory budget (backpressure)
	ReadPins              int64 // pins reads hold on parts now (bytes being copied, or lent to a reply); 0 when no read runs
	PeakInUseBytes        int64 // the most InUseBytes has been
	Cancelled             int64 // parts dropped before their GET finished
	Evicted               int64 // parts dropped to make room for another read
	Errors                int64 // GETs that failed
	ExactReads            int64 // random reads of objects larger than the cache fetched with a GET of their own bytes (exact.go)
	ChunkReads            int64 // parts made for such reads that run on to the end of their chunk, lent to the page cache (exact.go)
	// Unread counts, per purpose, the bytes fetched from the store into
	// parts that were let go with no read of them: read-ahead that a
	// reader never reached, guesses never opened, evictions. The bytes a
	// cache tier kept are counted too (a random reader may come back to
	// them there); a chunk's, lent to the page cache, are not.
	Unread [numPurposes]int64
	// EvictedUnread is the part of Unread that eviction let go: bytes
	// fetched and thrown away for room while their readers still read.
	EvictedUnread int64
}

// NextStats are counted by the next shards and hints (nextShards).
type NextStats struct {
	NextParts  int64 // parts prefetched from the next objects in listing order
	NextFound  int64 // opens that found their first part prefetched as a next object
	NextMissed int64 // opens of another object than the one their opener's stride guessed
	HintParts  int64 // parts prefetched because a loader hinted the object
	HintFound  int64 // opens that found their first part prefetched from a hint
}

// DenseStats are counted by the background fetch of dense objects
// (denseRest).
type DenseStats struct {
	DenseObjects int64 // objects random reads used densely enough to fetch the rest in the background
	DenseParts   int64 // parts fetched (or read from the ring) for them
}

// GetStats are counted by the GET pool.
type GetStats struct {
	Gets             int64 // ranged GETs finished, successful or not
	FetchedBytes     int64 // bytes those GETs returned
	CacheBytes       int64 // bytes parts read from the cache instead (read-ahead over a warm stretch)
	SinkSkippedBytes int64 // fetched read-ahead bytes not handed to the cache because it lagged (Config.SkipLaggingSink)
	PeakRunning      int64 // the most parts ever fetched at once: is read-ahead keeping the backend busy?
}

// ScheduleStats are counted by the loader's sample schedule.
type ScheduleStats struct {
	ScheduledRanges int64 // ranges of loaders' schedules queued
	ScheduleParts   int64 // parts fetched (or read from the ring) for them
	ScheduleRead    int64 // scheduled ranges a read reached while a part kept them
	ScheduleSkipped int64 // scheduled ranges dropped because their reader had gone past them
}

// PurposeNames names the purposes a part can have, in Stats.Unread's order.
func PurposeNames() []string { return purposeNames[:] }
