package warm

import (
	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// Shard is one object of a plan and how much of it is to fetch.
type Shard struct {
	Obj     store.Object
	Missing int64 // bytes of its blocks the cache lacks; 0: nothing to fetch
}

// Plan is what a warm is to do: the shards, in the order given, and the
// bytes to fetch and already cached, over all of them.
type Plan struct {
	Shards  []Shard
	Missing int64
	Cached  int64
}

// PlanCache plans the warm of objs into c: a block the ring holds is
// cached, every other is missing. The RAM tier does not count: it does not
// outlive the warm.
func PlanCache(c *cache.Cache, objs []store.Object) Plan {
	bs := c.BlockSize()
	var p Plan
	for _, o := range objs {
		var cached int64
		for index := int64(0); index*bs < o.Size; index++ {
			if c.Lookup(o, index).Has(cache.InRing) {
				cached += min(bs, o.Size-index*bs)
			}
		}
		p.add(Shard{Obj: o, Missing: o.Size - cached})
	}
	return p
}

// PlanAll plans the warm of objs whole, knowing nothing of a cache: the
// plan of a warm through a mount, whose cache is the mount's own.
func PlanAll(objs []store.Object) Plan {
	var p Plan
	for _, o := range objs {
		p.add(Shard{Obj: o, Missing: o.Size})
	}
	return p
}

func (p *Plan) add(s Shard) {
	p.Shards = append(p.Shards, s)
	p.Missing += s.Missing
	p.Cached += s.Obj.Size - s.Missing
}

// split returns the shards with nothing to fetch and those with something,
// each in plan order.
func (p Plan) split() (cached, missing []store.Object) {
	for _, s := range p.Shards {
		if s.Missing == 0 {
			cached = append(cached, s.Obj)
		} else {
			missing = append(missing, s.Obj)
		}
	}
	return cached, missing
}
