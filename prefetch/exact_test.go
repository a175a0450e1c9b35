package prefetch

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// One random pass of 256 KiB reads over part of an object larger than the
// whole cache (fio's randread-256k over a large file) asks the store for
// exactly the bytes read: no read fetches the rest of its block, which
// would be pushed out of the cache before the block's other reads came.
// Small reads of the same object still fetch whole blocks, and so do
// large random reads of an object the cache can hold.
func TestRandomReadsOfAnObjectLargerThanTheCacheAreExact(t *testing.T) {
	const bs = 1 << 20
	c := newRingCache(t, bs, 16*bs) // room: a 256-block ring and 16 blocks of RAM
	if c.Room() >= 512*bs {
		t.Fatalf("cache room %d, want less than the 512 MiB object", c.Room())
	}
	for _, tc := range []struct {
		name      string
		size      int64 // the object's
		read      int   // bytes per read
		wantExact bool
	}{
		{"large reads of an object larger than the cache", 512 * bs, 256 << 10, true},
		{"small reads of an object larger than the cache", 512 * bs, 4 << 10, false},
		{"large reads of an object the cache holds", 64 * bs, 256 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeFetcher{}
			s := newTestEngine(t, DefaultConfig(), f, c)
			obj := fakeObject("exact-"+tc.name, tc.size)
			var offs []int64
			for b := range int64(16) { // two reads in each of 16 blocks, never at 0, where a stream starts
				offs = append(offs, b*bs+int64(tc.read), b*bs+3*int64(tc.read))
			}
			rand.New(rand.NewPCG(5, 8)).Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
			buf := make([]byte, tc.read)
			var read int64
			for _, off := range offs {
				r := s.OpenReader(obj, false, 0)
				n, _, err := r.ReadAt(testContext(t), buf, off)
				r.Close()
				if err != nil || !bytes.Equal(buf[:n], wantBytes(obj, off, tc.read)) {
					t.Fatalf("read of %d bytes at %d: %d bytes, err %v; not the object's bytes", tc.read, off, n, err)
				}
				read += int64(n)
			}
			st := settledStats(t, s)
			asked := f.askedBytes.Load()
			t.Logf("%d reads of %d bytes: %d bytes asked of the store, %d exact reads", len(offs), tc.read, asked, st.ExactReads)
			switch {
			case tc.wantExact && (asked != read || st.ExactReads != int64(len(offs))):
				t.Errorf("%d random reads of %d bytes of a %d MiB object (cache room %d MiB) asked the store for %d bytes in %d exact reads; want exactly the %d bytes read, each read exact",
					len(offs), tc.read, tc.size>>20, c.Room()>>20, asked, st.ExactReads, read)
			case !tc.wantExact && (st.ExactReads != 0 || asked < 16*bs):
				t.Errorf("%d random reads of %d bytes of a %d MiB object: %d exact reads, %d bytes asked; want whole blocks (at least the 16 touched) and no exact read",
					len(offs), tc.read, tc.size>>20, st.ExactReads, asked)
			}
		})
	}
}

// One random pass of 256 KiB reads over the whole of an object larger than
// the cache, by a handle whose pages the kernel keeps (fio's randread-256k
// through the mount): the first read of each chunk is exact, a later one
// fetches the rest of its chunk and names its blocks for the page cache,
// and every block lent holds the object's bytes. The emulated page cache
// then serves the chunk's other reads. The store is asked for the object
// about once, in far fewer GETs than there are reads, and every part lent
// is let go.
func TestARandomPassOverAnObjectLargerThanTheCacheFetchesChunksForThePageCache(t *testing.T) {
	const bs, read = 1 << 20, 256 << 10
	c := newRingCache(t, bs, 16*bs)
	f := &fakeFetcher{}
	s := newTestEngine(t, DefaultConfig(), f, c)
	obj := fakeObject("chunked", 512*bs)
	if c.Room() >= obj.Size {
		t.Fatalf("cache room %d, want less than the %d-byte object", c.Room(), obj.Size)
	}
	var offs []int64
	for off := int64(read); off < obj.Size; off += read { // not 0, where a stream starts
		offs = append(offs, off)
	}
	rand.New(rand.NewPCG(3, 9)).Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })

	r := s.OpenReader(obj, false, 0)
	r.KeepsPages()
	pages := map[int64]bool{} // blocks the emulated page cache holds
	buf, blockBuf := make([]byte, read), make([]byte, bs)
	reads := 0
	for _, off := range offs {
		if pages[off/bs] {
			continue // served by the kernel: no READ reaches the daemon
		}
		reads++
		n, _, err := r.ReadAt(testContext(t), buf, off)
		if err != nil || !bytes.Equal(buf[:n], wantBytes(obj, off, read)) {
			t.Fatalf("read at %d: %d bytes, err %v; not the object's bytes", off, n, err)
		}
		first, count := r.FillRange(off, n)
		for index := first; index < first+count; index++ {
			start, data, ok := r.LendBlock(index, blockBuf)
			if !ok {
				t.Fatalf("block %d, named for a fill after the read at %d, was not lent", index, off)
			}
			if start != index*bs || !bytes.Equal(data, wantBytes(obj, start, bs)) {
				t.Fatalf("block %d lent for the page cache: %d bytes at %d, not the object's bytes", index, len(data), start)
			}
			pages[index] = true
		}
	}
	r.Close()
	st := settledStats(t, s)
	asked, gets := f.askedBytes.Load(), f.gets.Load()
	t.Logf("%d reads of %d reaching the daemon, %d GETs (%d exact, %d chunk parts), %d MiB asked of a %d MiB object",
		reads, len(offs), gets, st.ExactReads, st.ChunkReads, asked>>20, obj.Size>>20)
	if st.ChunkReads == 0 || asked > obj.Size+obj.Size/8 || gets*4 > int64(len(offs)) {
		t.Errorf("a random pass of %d reads: %d GETs, %d bytes asked; want at most %d bytes (the object and an eighth) in at most a quarter as many GETs as reads",
			len(offs), gets, asked, obj.Size+obj.Size/8)
	}
	if st.InUseBytes != 0 || st.ReadPins != 0 {
		t.Errorf("after Close: %d bytes of budget in use, %d read pins; want none: a lent part was kept", st.InUseBytes, st.ReadPins)
	}
}

// A handle whose pages the kernel does not keep (--page-cache direct)
// never fetches a chunk's rest: nothing would keep it.
func TestRandomReadsWithoutPageCacheStayExact(t *testing.T) {
	const bs, read = 1 << 20, 256 << 10
	c := newRingCache(t, bs, 16*bs)
	f := &fakeFetcher{}
	s := newTestEngine(t, DefaultConfig(), f, c)
	obj := fakeObject("direct", 512*bs)
	r := s.OpenReader(obj, false, 0)
	buf := make([]byte, read)
	for _, off := range []int64{20 * read, 3 * read, 17 * read, 9 * read} { // all in chunk 0
		if _, _, err := r.ReadAt(testContext(t), buf, off); err != nil {
			t.Fatal(err)
		}
		if _, count := r.FillRange(off, read); count != 0 {
			t.Fatalf("read at %d names %d blocks for a fill; want none for a 256 KiB read", off, count)
		}
	}
	r.Close()
	if st := settledStats(t, s); st.ChunkReads != 0 || f.askedBytes.Load() != 4*read {
		t.Errorf("4 reads of %d bytes in one chunk: %d chunk parts, %d bytes asked; want none, exactly the bytes read", read, st.ChunkReads, f.askedBytes.Load())
	}
}

// A handle closed before the fills took a chunk's blocks lets go of its
// part: its budget comes back.
func TestClosingAHandleLetsGoOfChunksNotLent(t *testing.T) {
	const bs, read = 1 << 20, 256 << 10
	c := newRingCache(t, bs, 16*bs)
	s := newTestEngine(t, DefaultConfig(), &fakeFetcher{}, c)
	obj := fakeObject("unlent", 512*bs)
	r := s.OpenReader(obj, false, 0)
	r.KeepsPages()
	buf := make([]byte, read)
	for _, off := range []int64{20 * read, 3 * read} { // the second read in chunk 0 fetches its rest
		if _, _, err := r.ReadAt(testContext(t), buf, off); err != nil {
			t.Fatal(err)
		}
	}
	if _, count := r.FillRange(3*read, read); count == 0 {
		t.Fatal("the second read in a chunk named no blocks for the page cache")
	}
	r.Close()
	if st := settledStats(t, s); st.ChunkReads != 1 || st.InUseBytes != 0 {
		t.Errorf("a handle closed with a chunk not lent: %d chunk parts, %d bytes of budget in use; want 1 part, none in use", st.ChunkReads, st.InUseBytes)
	}
}

// A page cache that keeps nothing of what it is handed (far smaller than
// the object): the reads of blocks fetched with chunks keep reaching the
// engine, and once they outnumber the chunks, the object's reads are all
// exact; the store is not asked for chunk after chunk that nobody reads.
func TestChunksStopWhenThePageCacheLosesThem(t *testing.T) {
	const bs, read = 1 << 20, 256 << 10
	c := newRingCache(t, bs, 16*bs)
	f := &fakeFetcher{}
	s := newTestEngine(t, DefaultConfig(), f, c)
	obj := fakeObject("lost", 512*bs)
	var offs []int64
	for off := int64(read); off < obj.Size; off += read {
		offs = append(offs, off)
	}
	rand.New(rand.NewPCG(4, 2)).Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
	r := s.OpenReader(obj, false, 0)
	r.KeepsPages()
	buf, blockBuf := make([]byte, read), make([]byte, bs)
	for _, off := range offs {
		n, _, err := r.ReadAt(testContext(t), buf, off)
		if err != nil || !bytes.Equal(buf[:n], wantBytes(obj, off, read)) {
			t.Fatalf("read at %d: %d bytes, err %v; not the object's bytes", off, n, err)
		}
		first, count := r.FillRange(off, n)
		for index := first; index < first+count; index++ {
			r.LendBlock(index, blockBuf) // handed over, and forgotten at once
		}
	}
	r.Close()
	st := settledStats(t, s)
	asked := f.askedBytes.Load()
	t.Logf("%d reads: %d chunk parts, %d exact reads, %d MiB asked of a %d MiB object", len(offs), st.ChunkReads, st.ExactReads, asked>>20, obj.Size>>20)
	// At most 4 × minChunksJudged chunks (lost*4 > made), each of two
	// parts, before the stop.
	chunks := int64(4 * minChunksJudged)
	if limit := obj.Size + chunks*DefaultPartSize; st.ChunkReads > 2*chunks || asked > limit {
		t.Errorf("a random pass whose page cache keeps nothing: %d chunk parts, %d bytes asked; want chunks to stop within %d, at most %d bytes asked",
			st.ChunkReads, asked, chunks, limit)
	}
}
