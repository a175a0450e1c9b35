package prefetch

// Density is how the random reads of one object use it, across every
// handle open on it: Sparse (fetch only the blocks they touch) or Dense
// (fetch the rest of the object in the background).
type Density uint8

const (
	Sparse Density = iota
	Dense
)

func (d Density) String() string {
	if d == Dense {
		return "dense"
	}
	return "sparse"
}

// RandomAccess is what the density rule knows of an object's random reads.
type RandomAccess struct {
	Size      int64 // the object's
	BlockSize int64
	Budget    int64 // the read-ahead budget (Config.Memory)
	Touched   int64 // distinct blocks random reads have landed on
	Room      int64 // bytes the cache can keep at once (RAM tier and ring); 0: no cache
	Taken     int64 // bytes asked for by the random reads that landed on a new block
}

// The density rule's thresholds.
const (
	// minDenseBlocks: one random read of an object is a peek (a header, a
	// single sample); the second on another block is a pattern.
	minDenseBlocks = 2
	// smallObjectDivisor: an object no larger than Budget/8 is small next
	// to the budget. Its rest is fetched once random reads have taken
	// half of it (smallTakenFraction), not before: a shard is small, but
	// a sparse reader (an evaluation subset, lookups) touches a few blocks
	// of each of many shards, and fetching each shard whole after its
	// second read fetched ten times what such readers read. A loader that
	// reads every sample says so with its schedule (schedule.go), which
	// the density rule leaves alone.
	smallObjectDivisor = 8
	// smallTakenFraction: a small object turns dense once random reads
	// have taken 1/smallTakenFraction of it. Ski rental: the rest fetched
	// then is at most what was read, so the object costs at most twice
	// the bytes its reads asked for, however few come after.
	smallTakenFraction = 2
	// denseFraction: once random reads have touched a quarter of a
	// larger object's blocks, the rest is fetched. Ski rental: the rest
	// is at most three times what was read, so a reader who stops right
	// after the switch has cost at most four times what it read, while
	// one who reads on (a shuffled epoch, fio's one random pass) waits
	// for one stream of part GETs instead of a round trip per block; at a
	// half, a reader that reads the object through spends most of its
	// time in the round trips before the switch. 200 random
	// reads of a 1 GiB object (1024 blocks of 1 MiB) touch about 180:
	// sparse.
	denseFraction = 4
	// takenFraction: random reads that have taken a 64th of an object
	// are reading it through, not looking things up in it: fio's one
	// random pass of 256 KiB reads, a loader's large samples. The rest
	// is fetched then: for a 2 GiB object after 128 reads of 256 KiB
	// instead of 512, each a round trip for one block while the reader
	// waits. Before a quarter of the blocks are touched, only reads that
	// average more than a sixteenth of a block get there: 200 random
	// 4 KiB reads of 1 GiB have taken 800 KiB of it. Only reads that
	// land on a new block count, so one sample read over and over adds
	// up to nothing.
	takenFraction = 64
)

// Classify applies the density rule. Like Policy, it does no I/O and reads
// no clock: the same reads give the same answer.
func Classify(a RandomAccess) Density {
	switch {
	case a.Touched < minDenseBlocks || a.Size <= 0 || a.BlockSize <= 0:
		return Sparse
	case a.Size > a.Room:
		// Fetched ahead of its reads, the rest of the object would push
		// the first blocks out of the cache before their reads came,
		// and every block would be fetched again: one pass of reads
		// would fetch the object several times over.
		return Sparse
	case a.Size <= a.Budget/smallObjectDivisor:
		if a.Taken*smallTakenFraction >= a.Size {
			return Dense
		}
		return Sparse
	case a.Touched*a.BlockSize*denseFraction >= a.Size:
		return Dense
	case a.Taken*takenFraction >= a.Size:
		return Dense
	}
	return Sparse
}

// randomAccess records the distinct blocks random reads touched in one
// object version, and whether its rest is being fetched.
type randomAccess struct {
	touched bitset // by block
	count   int64  // bits set
	taken   int64  // bytes asked for by reads that set a bit (RandomAccess.Taken)
	dense   bool   // the background fetch started; it is never started twice
}

// maxTrackedBlocks bounds the bitset of one object (512 KiB at 1 MiB
// blocks: a 4 TiB object); larger objects are always sparse.
const maxTrackedBlocks = 1 << 22

// maxTrackedObjects bounds how many objects' random reads are remembered;
// past it the record starts afresh (an epoch over that many shards reads
// each densely enough to be told again).
const maxTrackedObjects = 4096

// touch records that block index was read and reports whether it was new.
func (a *randomAccess) touch(index int64) bool {
	if !a.touched.set(index) {
		return false
	}
	a.count++
	return true
}
