package cache

import "sync/atomic"

// Stats is a snapshot of the cache's counters. Hits and misses count blocks.
// Bytes served count what callers were handed: the length copied, for the
// reads that copy (ReadAt, ReadRAM, ReadChunks), and the whole block
// for Get, whose caller keeps the block and may read only part of it (a
// handle's later reads of that block then come from the block it kept and
// count nothing here). Bytes delivered to readers are the read path's
// count, not these.
type Stats struct {
	RAMHits          uint64
	RAMMisses        uint64
	RAMBytesServed   uint64
	RAMEvictions     uint64
	RAMBytes         int64 // bytes held by the RAM tier
	RingHits         uint64
	RingMisses       uint64
	RingBytesServed  uint64
	RingBytesRead    uint64 // bytes read from the ring's disk: whole blocks, whatever the caller wanted of them
	Puts             uint64 // whole blocks handed to Put
	RingWrites       uint64 // blocks written into ring slots
	RingPresummed    uint64 // of RingWrites, blocks whose CRCs a Summer made as their bytes arrived
	Evictions        uint64 // valid ring blocks overwritten by the write head
	ChecksumFailures uint64 // ring blocks dropped because their CRC32C did not match
	RingBytes        int64  // bytes of valid blocks in the ring (occupancy)
	RingSlots        int64  // slots in the ring
	RingUsedSlots    int64  // slots holding a valid block
	Leases           int64  // leases not yet released
	WholeFiles       int64  // whole-shard files held
	WholeBytes       int64  // their bytes
	WholeQuota       int64  // bytes they may use
	WholeMade        uint64 // whole-shard files made
	WholeAsRead      uint64 // of WholeMade, files written while their shards were read (build.go), not copied after
	WholeEvictions   uint64 // whole-shard files unlinked for room
	WholeOpens       uint64 // descriptors of whole-shard files handed out
	WholeChecks      uint64 // whole-shard files read and CRC-checked before a descriptor was handed out
	WholeCheckFails  uint64 // of WholeChecks, files that failed and were dropped
	WholeQueueFull   uint64 // shards read whole not queued to be made whole-shard files: too many waited
	RingEnabled      bool
}

// counters are the live values behind Stats.
type counters struct {
	ramHits, ramMisses, ramBytesServed, ramEvictions atomic.Uint64
	ringHits, ringMisses, ringBytesServed            atomic.Uint64
	ringBytesRead                                    atomic.Uint64
	puts, ringWrites, evictions, checksumFailures    atomic.Uint64
	ringPresummed                                    atomic.Uint64
	leases                                           atomic.Int64
	wholeQueueFull, wholeAsRead                      atomic.Uint64
}

func (k *counters) snapshot() Stats {
	return Stats{
		RAMHits:          k.ramHits.Load(),
		RAMMisses:        k.ramMisses.Load(),
		RAMBytesServed:   k.ramBytesServed.Load(),
		RAMEvictions:     k.ramEvictions.Load(),
		RingHits:         k.ringHits.Load(),
		RingMisses:       k.ringMisses.Load(),
		RingBytesServed:  k.ringBytesServed.Load(),
		RingBytesRead:    k.ringBytesRead.Load(),
		Puts:             k.puts.Load(),
		RingWrites:       k.ringWrites.Load(),
		RingPresummed:    k.ringPresummed.Load(),
		Evictions:        k.evictions.Load(),
		ChecksumFailures: k.checksumFailures.Load(),
		Leases:           k.leases.Load(),
		WholeQueueFull:   k.wholeQueueFull.Load(),
		WholeAsRead:      k.wholeAsRead.Load(),
	}
}
