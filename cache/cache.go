package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/shardfs/shardfs/cache/cachedir"
	"github.com/shardfs/shardfs/cache/wholefile"
	"github.com/shardfs/shardfs/store"
)

// Cache holds blocks of object versions in a RAM tier and a persistent
// ring. It is safe for concurrent use. It composes the types that do the
// work, each with one job: the RAM tier (memTier, memtier.go: its blocks
// and its counted reads), the ring (ring, ring.go: its slots, their index
// and their writes), the ring's checked reads (ringReader, ringread.go),
// the leases (leaser, lease.go), the whole-shard files (wholeTier,
// wholefiles.go) and the copies that make them of shards read whole
// (promoter, promote.go). Cache itself keeps the public API, where the
// tiers are combined, the ring's switch, and the gate that Close shuts.
type Cache struct {
	cfg   Config
	log   *slog.Logger
	stats counters
	ram   *memTier       // nil when MemorySize is 0
	ring  *ring          // nil when there is no usable cache dir
	whole wholeTier      // nil without a ring or with WholeShardPercent 0 (wholefiles.go)
	lock  *cachedir.Lock // held while ring is open
	bufs  *blockPool

	reads    ringReader   // checked reads of ring blocks (ringread.go)
	leases   leaser       // makes leases of ring and arena slots (lease.go)
	versions *versionMemo // versionIDs of the objects read lately
	promote  *promoter    // makes whole-shard files of shards read whole (promote.go)
	builds   builds       // whole-shard files written while their shards are read (build.go)

	ringOff      atomic.Bool // set when ring I/O failed; the ring is then bypassed
	ringOffWarns sync.Once

	life gate // admits operations until Close (gate.go); see the lock order in ring.go
}

// Open builds a cache from cfg, which must be valid. It takes the cache dir's
// lock and rebuilds the ring's index from its slot headers. It fails, with
// one line naming the cause, when the ring cannot be used as asked (a dir
// that is not the user's own, unwritable or full, a ring of another shape
// that would be emptied, or, with ErrLocked, a dir another process owns):
// a cache asked for a disk tier never runs quietly without one.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cache{cfg: cfg, log: log, versions: newVersionMemo(), bufs: newBlockPool(cfg.BlockSize)}
	c.reads = ringReader{live: c.liveRing, bufs: c.bufs, stats: &c.stats, log: log}
	c.leases = leaser{blockSize: cfg.BlockSize, stats: &c.stats, bufs: c.bufs, failed: c.reads.failed}
	c.promote = &promoter{
		lookup:   c.Lookup,
		makeFile: c.MakeWholeFile,
		// No gate to enter: Close stops the promoter before it shuts
		// the gate, and waits for a finish under way.
		finishFile: func(ctx context.Context, obj store.Object, b *wholefile.Builder) (bool, error) {
			return b.Finish(ctx, c.checkedRead(obj))
		},
		markChecked: func(obj store.Object) { c.whole.MarkChecked(c.wholeShard(obj)) },
		blockSize:   cfg.BlockSize,
		log:         log,
		queueFull:   &c.stats.wholeQueueFull,
		asRead:      &c.stats.wholeAsRead,
	}
	if cfg.MemorySize > 0 {
		ram, err := newMemTier(cfg.MemorySize, cfg.BlockSize, cfg.SharedMemoryDir, &c.stats)
		if err != nil {
			return nil, err
		}
		c.ram = ram
	}
	if cfg.Dir == "" {
		return c, nil
	}
	r, w, lock, err := openDir(ctx, cfg, &c.stats, log)
	if err != nil {
		if c.ram != nil {
			c.ram.close()
		}
		return nil, err
	}
	c.ring, c.whole, c.lock = r, w, lock
	return c, nil
}

// openDir takes cfg.Dir's lock and opens its ring and, with
// WholeShardPercent, its whole-shard files (nil without); on failure it
// leaves nothing open.
func openDir(ctx context.Context, cfg Config, stats *counters, log *slog.Logger) (*ring, wholeTier, *cachedir.Lock, error) {
	if err := cachedir.CheckDir(cfg.Dir); err != nil {
		return nil, nil, nil, err
	}
	lock, err := cachedir.LockDir(cfg.Dir)
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := openRing(ctx, cfg, stats, log)
	if err != nil {
		lock.Unlock()
		return nil, nil, nil, err
	}
	var whole wholeTier
	if p := cfg.WholeShardPercent; p > 0 {
		w, err := wholefile.Open(cfg.Dir, wholeQuota(r.geo.fileSize(), p), log)
		if err != nil {
			r.file.close()
			lock.Unlock()
			return nil, nil, nil, err
		}
		whole = w
	}
	return r, whole, lock, nil
}

// liveRing returns the ring, or nil when it is absent or switched off.
func (c *Cache) liveRing() *ring {
	if c.ring == nil || c.ringOff.Load() {
		return nil
	}
	return c.ring
}

// disableRing switches the ring off after an I/O failure, warning once.
func (c *Cache) disableRing(err error) {
	c.ringOff.Store(true)
	c.ringOffWarns.Do(func() {
		c.log.Warn("cache ring failed; caching in memory only", "dir", c.cfg.Dir, "err", err)
	})
}

// HasRAMTier reports whether the cache has a RAM tier (MemorySize > 0).
func (c *Cache) HasRAMTier() bool { return c.ram != nil }

// SharesRAM reports whether the RAM tier lives in a shared file that
// LeaseRAM hands out (Config.SharedMemoryDir).
func (c *Cache) SharesRAM() bool { return c.ram != nil && c.ram.arena != nil }

// Room is how many bytes of blocks the cache can keep at once: the RAM
// tier's size and the ring's slots, unless the ring was switched off.
func (c *Cache) Room() int64 {
	room := int64(0)
	if c.ram != nil {
		room += c.cfg.MemorySize
	}
	if c.ring != nil && !c.ringOff.Load() {
		room += c.ring.geo.slots * c.cfg.BlockSize
	}
	return room
}

// BlockSize is the size of every block but an object's last.
func (c *Cache) BlockSize() int64 { return c.cfg.BlockSize }

// Stats returns a snapshot of the counters.
func (c *Cache) Stats() Stats {
	s := c.stats.snapshot()
	if c.ram != nil && c.life.enter() {
		s.RAMBytes = c.ram.bytes()
		c.life.leave()
	}
	if c.ring != nil {
		s.RingBytes, s.RingUsedSlots = c.ring.occupancy()
		s.RingSlots = c.ring.geo.slots
	}
	s.RingEnabled = c.liveRing() != nil
	if c.whole != nil {
		w := c.whole.Stats()
		s.WholeFiles, s.WholeBytes, s.WholeQuota = w.Files, w.Bytes, w.Quota
		s.WholeMade, s.WholeEvictions, s.WholeOpens = w.Made, w.Evictions, w.Opens
		s.WholeChecks, s.WholeCheckFails = w.Checks, w.CheckFails
	}
	return s
}

// Close waits for operations in flight, flushes the ring and releases the
// cache dir. Leases still held become meaningless. Close is idempotent.
func (c *Cache) Close() error {
	c.promote.stop() // before the gate: a copy holds the cache entered
	var errs []error
	c.life.shut(func() {
		if c.ram != nil {
			c.ram.close()
		}
		if c.ring != nil {
			if err := c.ring.file.sync(); err != nil && !c.ringOff.Load() {
				errs = append(errs, fmt.Errorf("flush cache ring: %w", err))
			}
			if c.whole != nil {
				c.builds.abandonAll()
				errs = append(errs, c.whole.Close())
			}
			errs = append(errs, c.ring.file.close(), c.lock.Unlock())
		}
	})
	return errors.Join(errs...)
}
