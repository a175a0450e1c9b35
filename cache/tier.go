package cache

import "github.com/shardfs/shardfs/store"

// Tier is a set of the tiers that hold a block: InRAM, InRing, both, or
// neither (NotCached). Lookup answers with one; Get takes one to say where
// to look and answers with the one that served.
type Tier uint8

const (
	NotCached Tier = 0
	InRAM     Tier = 1 << iota
	InRing
)

// Has reports whether t includes every tier of u.
func (t Tier) Has(u Tier) bool { return t&u == u && u != 0 }

func (t Tier) String() string {
	switch t {
	case NotCached:
		return "none"
	case InRAM:
		return "ram"
	case InRing:
		return "ring"
	}
	return "ram+ring"
}

// Placement says where bytes go, chosen by what will read them next. It is
// a hint: the RAM tier may drop what it is offered, and no placement
// writes a block the ring already holds.
type Placement uint8

const (
	// ForReadAhead: a sequential reader reads them from its own buffer
	// (a prefetch part) and its page cache keeps them: ring only. A ring
	// block read for it is not promoted to RAM.
	ForReadAhead Placement = iota
	// ForRandomRead: a reader that will come back for them: ring and RAM.
	// With a ring, RAM takes them into its free room alone, and the ring
	// keeps the rest in the page cache, where small reads find them.
	ForRandomRead
	// ForOneShot: a reader with no page cache behind it (the GPU side
	// interface's READ): RAM only, and only into free room; nothing is
	// evicted for it.
	ForOneShot
)

// Lookup says which tiers hold block index of obj, without reading it. A
// RAM block counts only when whole; a ring block is not verified until
// read.
func (c *Cache) Lookup(obj store.Object, index int64) Tier {
	if index < 0 || !c.life.enter() {
		return NotCached
	}
	defer c.life.leave()
	k := blockKey{version: c.version(obj), index: index}
	t := NotCached
	if c.ram != nil {
		if c.ram.has(k, blockLength(obj, c.cfg.BlockSize, index)) {
			t |= InRAM
		}
	}
	if r := c.liveRing(); r != nil && r.has(k) {
		t |= InRing
	}
	return t
}
