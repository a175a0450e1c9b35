package main

import (
	"context"
	"log/slog"

	"github.com/shardfs/shardfs/cache"
	shardfs "github.com/shardfs/shardfs/fs"
	"github.com/shardfs/shardfs/gds"
	"github.com/shardfs/shardfs/metrics"
	"github.com/shardfs/shardfs/store"
)

// rootFiles lets the GPU interface read through a root that is built
// after it (the root needs the server, the server reads through the root).
type rootFiles struct {
	root  *shardfs.Root
	cache *cache.Cache // may be nil
}

func (f *rootFiles) Object(path string) (store.Object, bool) { return f.root.Object(path) }

func (f *rootFiles) ReadAt(ctx context.Context, obj store.Object, p []byte, off int64) (int, error) {
	return f.root.ReadAt(ctx, obj, p, off)
}

// LeaseRAM pins RAM-tier blocks in the tier's shared file (gds.RAMLeaser).
func (f *rootFiles) LeaseRAM(obj store.Object, off, n int64) (*cache.Lease, error) {
	return f.cache.LeaseRAM(obj, off, n)
}

// SharesRAM says whether the RAM tier is shared.
func (f *rootFiles) SharesRAM() bool { return f.cache != nil && f.cache.SharesRAM() }

// Residency says where [off, off+n) of obj is now, from the cache's
// lookups (no read): the batch path serves RAM entries first.
func (f *rootFiles) Residency(obj store.Object, off, n int64) gds.Residency {
	if f.cache == nil || n <= 0 {
		return gds.ResidentStore
	}
	bs := f.cache.BlockSize()
	where := gds.ResidentRAM
	for i := off / bs; i <= (off+n-1)/bs; i++ {
		switch t := f.cache.Lookup(obj, i); {
		case t.Has(cache.InRAM):
		case t.Has(cache.InRing):
			where = gds.ResidentRing
		default:
			return gds.ResidentStore
		}
	}
	return where
}

// newGDSServer builds the GPU interface. Leases need the ring; with
// no ring, LEASE answers EOPNOTSUPP and capabilities say so.
func newGDSServer(cc *cache.Cache, files *rootFiles, log *slog.Logger) *gds.Server {
	cfg := gds.Config{BlockSize: cc.BlockSize()}
	var leaser gds.Leaser
	if st := cc.Stats(); st.RingEnabled {
		leaser = cc
		// Leases may pin half the ring: the other half keeps caching.
		cfg.MaxLeasedBytes = st.RingSlots * cc.BlockSize() / 2
	}
	return gds.NewServer(cfg, files, leaser, gds.NewNVMLSource(nil), log)
}

// registerGDSMetrics exposes what GPU clients hold and were refused.
func registerGDSMetrics(m *metrics.Metrics, s *gds.Server) {
	stat := func(f func(gds.LimitStats) float64) func() float64 {
		return func() float64 { return f(s.Stats()) }
	}
	m.GaugeFunc("shardfs_gds_buffers", "Buffers GPU clients have registered.", stat(func(s gds.LimitStats) float64 { return float64(s.Buffers) }))
	m.GaugeFunc("shardfs_gds_leases", "Leases GPU clients hold.", stat(func(s gds.LimitStats) float64 { return float64(s.Leases) }))
	m.GaugeFunc("shardfs_gds_leased_bytes", "Ring bytes the held leases pin.", stat(func(s gds.LimitStats) float64 { return float64(s.LeasedBytes) }))
	m.CounterFunc("shardfs_gds_refused_uid_limit_total", "REGISTER and LEASE requests refused by a per-user limit.", stat(func(s gds.LimitStats) float64 { return float64(s.RefusedUIDLimit) }))
	m.GaugeFunc("shardfs_gds_batch_in_flight", "Batch READ entries accepted and not yet completed.", stat(func(s gds.LimitStats) float64 { return float64(s.BatchInFlight) }))
	m.CounterFunc("shardfs_gds_batch_refused_total", "SUBMITs refused by a bound on batch entries in flight (handle, uid or mount).", stat(func(s gds.LimitStats) float64 { return float64(s.BatchRefused) }))
	m.CounterFunc("shardfs_gds_refused_mount_limit_total", "REGISTER and LEASE requests refused by the mount's limit.", stat(func(s gds.LimitStats) float64 { return float64(s.RefusedMountLimit) }))
}
