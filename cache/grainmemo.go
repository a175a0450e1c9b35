package cache

import "sync/atomic"

// grainMemo keeps the grain tables that small reads (ring.readRange) have
// read back and found to match the ring's CRC of them, so that the next
// small read of the same slot reads its grains alone: the table is 1 KiB
// of a 4 KiB read, and a syscall of its own. It is direct-mapped by slot
// number and bounded (maxMemoTables, about 1 KiB each); an entry is used
// only for the very slot write it was read for: same slot, same
// generation, same table CRC. Entries are never changed once made, so a
// reader needs no lock: it loads a pointer and compares.
type grainMemo struct {
	entries []atomic.Pointer[memoTable]
}

type memoTable struct {
	n    int64
	gen  uint64
	sum  uint32
	sums grainSums
}

// maxMemoTables bounds the memo: 4 MiB of tables, the small-read working
// set of a 4 GiB stretch of 1 MiB blocks.
const maxMemoTables = 4096

func newGrainMemo(slots int64) *grainMemo {
	return &grainMemo{entries: make([]atomic.Pointer[memoTable], max(min(slots, maxMemoTables), 1))}
}

// get returns the table of the slot write ref names, if it is kept.
func (m *grainMemo) get(ref slotRef) (*grainSums, bool) {
	e := m.entries[ref.n%int64(len(m.entries))].Load()
	if e == nil || e.n != ref.n || e.gen != ref.gen || e.sum != ref.grains {
		return nil, false
	}
	return &e.sums, true
}

// put keeps table, the encoded grain table of the slot write ref names,
// which matched ref.grains, and returns its CRCs.
func (m *grainMemo) put(ref slotRef, table []byte) *grainSums {
	e := &memoTable{n: ref.n, gen: ref.gen, sum: ref.grains}
	e.sums.decode(table)
	m.entries[ref.n%int64(len(m.entries))].Store(e)
	return &e.sums
}
