package prefetch

// Range is the half-open byte range [Start, End).
type Range struct{ Start, End int64 }

// Len is the number of bytes in r; an inverted range is empty.
func (r Range) Len() int64 { return max(r.End-r.Start, 0) }

// Empty reports whether r holds no bytes.
func (r Range) Empty() bool { return r.End <= r.Start }

// Plan is what the policy wants after one read. Every range is aligned to
// blocks, except that an End may be the object's size.
type Plan struct {
	Sequential bool
	Need       Range // the blocks the read touches
	Ahead      Range // read-ahead to have fetched or in flight after Need; empty when random
	Keep       Range // held parts outside Keep are of no more use to this stream
	Spill      int64 // how far the window reaches past the end of the object; 0 when it does not
	Window     int64 // the sequential window; 0 when random
}

// A stream that seeked is treated as sequential again once minSequentialRun
// reads in a row have landed near each other and covered at least
// minSequentialBlocks blocks: one read near the last is as likely a random
// hit as a stream, and a single large random read arrives as several
// adjacent requests (the kernel splits it and reads a little ahead), which
// must not start read-ahead.
const (
	minSequentialRun    = 2
	minSequentialBlocks = 4
)

// growthDivisor: the window doubles each time the reader consumes
// window/growthDivisor bytes.
const growthDivisor = 8

// Policy decides read-ahead for one handle from the offsets and sizes of its
// reads alone. It does no I/O, starts nothing and reads no clock, so every
// decision is reproducible from the sequence of reads.
//
// A read counts as sequential when it lands within ReorderWindow of the
// front (the furthest byte read since the last seek), behind or ahead: the
// kernel's async read-ahead sends several requests at once and they arrive
// in any order. A random-mode handle uses two blocks instead: random reads
// that happen to land a few MiB apart are not a stream. The first read of a handle at offset 0 starts a sequential
// run at once (loaders read shards from the start, and the first byte should
// not wait for proof); any other run needs minSequentialRun reads covering
// minSequentialBlocks blocks. A
// sequential window starts at one block and doubles each time the reader
// consumes an eighth of it, up to MaxPrefetch. A read far from the front is a
// seek: the run restarts in random mode, where a read fetches only the
// blocks it touches.
type Policy struct {
	blockSize, partSize, maxWindow, reorder int64
	size                                    int64

	started    bool
	sequential bool
	run        int   // reads in a row near the front
	runStart   int64 // offset of the first read of this run
	front      int64 // furthest end offset read in this run
	window     int64
	grownAt    int64 // front when the window last grew
}

// NewPolicy returns the policy of a handle on an object of size bytes. cfg
// must be valid.
func NewPolicy(cfg Config, size int64) *Policy {
	return &Policy{
		blockSize: cfg.BlockSize,
		partSize:  cfg.PartSize,
		maxWindow: cfg.MaxPrefetch,
		reorder:   cfg.ReorderWindow,
		size:      size,
	}
}

// Prime starts the handle as a sequential stream from offset 0 with the
// given window, for an object whose start was already prefetched because
// the reader of the previous object was streaming: the ramp-up continues
// rather than restarting from one block. A first read far from 0 still
// counts as a seek.
func (p *Policy) Prime(window int64) {
	p.started, p.sequential, p.run = true, true, 1
	p.runStart, p.front, p.grownAt = 0, 0, 0
	p.window = min(max(p.ceilBlock(window), p.blockSize), p.maxWindow)
	p.check()
}

// Sequential reports whether the handle is in a sequential run.
func (p *Policy) Sequential() bool { return p.sequential }

// Whole reports whether the handle's reads so far cover the object from
// its first byte to its last in one run, with no seek.
func (p *Policy) Whole() bool { return p.started && p.runStart == 0 && p.front >= p.size }

// FromStart reports whether the handle is in a sequential run from the
// object's first byte that has read n bytes, or all of a smaller object.
func (p *Policy) FromStart(n int64) bool {
	return p.started && p.sequential && p.runStart == 0 && p.front >= min(n, p.size)
}

// Read records a read of n bytes at off and returns what to fetch.
func (p *Policy) Read(off, n int64) Plan {
	off = min(max(off, 0), p.size)
	end := min(off+max(n, 0), p.size)
	slack := max(p.reorder, p.blockSize)
	// Out-of-order arrival is the kernel's async read-ahead, which only a
	// stream triggers; while random, a read continues a run only when it
	// lands within two blocks of the front (one large read split in pieces).
	reach := slack
	if !p.sequential {
		reach = min(slack, 2*p.blockSize)
	}
	near := p.started && off >= p.front-reach && off <= p.front+reach
	switch {
	case !p.started && off == 0:
		p.run, p.runStart, p.front = 1, 0, end
		p.startSequential()
	case near:
		p.run++
		p.runStart = min(p.runStart, off)
		p.front = max(p.front, end)
		if p.sequential {
			p.grow()
		} else if p.run >= minSequentialRun && p.front-p.runStart >= minSequentialBlocks*p.blockSize {
			p.startSequential()
		}
	default:
		p.sequential, p.run, p.runStart, p.front, p.window = false, 1, off, end, 0
	}
	p.started = true
	p.check()
	return p.plan(off, end, slack)
}

func (p *Policy) startSequential() {
	p.sequential = true
	p.window = min(p.blockSize, p.maxWindow)
	p.grownAt = p.front
}

// grow doubles the window each time the reader consumes an eighth of it
// (and at least a block): the window stays about eight times what the
// stream has shown it will read, so it ramps up within a few round trips
// while a short run after a seek wastes little.
func (p *Policy) grow() {
	if p.front-p.grownAt >= max(p.window/growthDivisor, p.blockSize) {
		p.window = min(2*p.window, p.maxWindow)
		p.grownAt = p.front
	}
}

func (p *Policy) plan(off, end, slack int64) Plan {
	need := Range{p.floorBlock(off), min(p.ceilBlock(end), p.size)}
	if end <= off {
		need = Range{off, off}
	}
	if !p.sequential {
		plan := Plan{Need: need, Keep: need}
		if p.run >= minSequentialRun && need.End < p.size {
			// A run too short to be a stream is most likely one large read
			// the kernel split: the block after it is probably next.
			plan.Ahead = Range{need.End, min(need.End+p.blockSize, p.size)}
			plan.Keep.End = plan.Ahead.End
		}
		return plan
	}
	reach := p.front + p.window
	spill := max(reach-p.size, 0)
	aheadEnd := p.ceilBlock(reach)
	if p.window >= p.partSize {
		// Whole parts only, so a wide window is fetched in PartSize GETs
		// rather than in slivers the size of each read.
		aheadEnd = ceilTo(reach, p.partSize)
	}
	aheadEnd = min(aheadEnd, p.size)
	plan := Plan{Sequential: true, Need: need, Spill: spill, Window: p.window}
	if aheadEnd > need.End {
		plan.Ahead = Range{need.End, aheadEnd}
	}
	plan.Keep = Range{p.floorBlock(max(p.front-slack, 0)), max(aheadEnd, need.End)}
	return plan
}

func (p *Policy) floorBlock(off int64) int64 { return off / p.blockSize * p.blockSize }
func (p *Policy) ceilBlock(off int64) int64  { return ceilTo(off, p.blockSize) }

// ceilTo rounds n up to a multiple of unit.
func ceilTo(n, unit int64) int64 { return (n + unit - 1) / unit * unit }

// check asserts the policy's invariants in builds with the invariants tag.
func (p *Policy) check() {
	if !invariants {
		return
	}
	switch {
	case p.sequential && (p.window < min(p.blockSize, p.maxWindow) || p.window > p.maxWindow):
		panic("prefetch: sequential window out of bounds")
	case !p.sequential && p.window != 0:
		panic("prefetch: random handle with a window")
	case p.front < 0 || p.front > p.size:
		panic("prefetch: front outside the object")
	}
}
