package cache

import (
	"testing"
	"testing/synctest"
)

// buildConfig is a ring of slots blocks beside whole-shard files of three
// times its size, so that a shard larger than the ring fits the tier.
func buildConfig(dir string, slots int64) Config { return wholeShareConfig(dir, slots, 75) }

// putBlocks puts o's blocks at the indexes given, one Put each, as
// read-ahead puts them.
func putBlocks(c *Cache, o testObject, indexes ...int64) {
	bs := c.BlockSize()
	for _, i := range indexes {
		putAhead(c, o.obj, i*bs, o.data[i*bs:min((i+1)*bs, o.obj.Size)])
	}
}

// TestAShardReadFromItsStartIsAFileWhenItsReadEnds: the blocks of a shard
// that a handle reads from its first byte go to its whole-shard file as
// they are put, in any order; the file is finished when the read ends
// whole, with the blocks put before the build began read from the cache
// (here the RAM tier, where a stream's first blocks are). The ring here
// holds four blocks of a seven-block shard, so a copy from the ring after
// the read could not make the file.
func TestAShardReadFromItsStartIsAFileWhenItsReadEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg := buildConfig(dir, 4)
		cfg.MemorySize = 4 * testBlock
		c := openCache(t, cfg)
		o := newTestObject("streamed.tar", 6*testBlock+77)
		putRange(c, o.obj, 0, o.data[:testBlock]) // before the read was known to be whole
		c.ReadingWhole(o.obj)
		putBlocks(c, o, 2, 1, 3, 5, 4)
		putBlocks(c, o, 6)
		if c.Lookup(o.obj, 1) != NotCached {
			t.Fatal("block 1 is still cached after six more blocks in a ring of four slots: the test cannot tell a build from a copy")
		}
		if st := c.Stats(); st.RingWrites != 1 {
			t.Errorf("%d blocks written to the ring, want 1 (block 0, put before the build began): a block of a shard being written as read goes to its file alone", st.RingWrites)
		}
		if c.HasWholeFile(o.obj) {
			t.Fatal("a whole-shard file is held before the read ended")
		}
		c.ReadDone(o.obj, true)
		synctest.Wait()
		mustReadWhole(t, c, o)
		if st := c.Stats(); st.WholeChecks != 0 || st.WholeAsRead != 1 {
			t.Errorf("%d whole-shard files checked at their first open, %d written as read; want 0 (the build summed the bytes) and 1", st.WholeChecks, st.WholeAsRead)
		}
		if names := wholeEntries(t, dir); len(names) != 1 {
			t.Fatalf("whole-shard files %v, want the one of %s", names, o.obj.Key)
		}
		// The next mount checks the file against the CRC its record holds,
		// combined from the blocks' CRCs: it must pass.
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c = openCache(t, cfg)
		mustReadWhole(t, c, o)
		if st := c.Stats(); st.WholeChecks != 1 || st.WholeCheckFails != 0 {
			t.Errorf("after a restart: %d whole-shard files checked, %d failed; want 1 and 0", st.WholeChecks, st.WholeCheckFails)
		}
	})
}

// TestAReadThatEndsShortLeavesNoFile: a build whose handle ends without
// reading the shard whole is removed and its room given back, once every
// handle reading the shard whole has ended; a second handle's build keeps
// going while one of two ends short.
func TestAReadThatEndsShortLeavesNoFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		c := openCache(t, buildConfig(dir, 4))
		// Two shards that fill the tier's quota between them: a build
		// whose room was not given back leaves none for the second.
		size := wholeQuota(c.ring.geo.fileSize(), 75)/2 - 8
		o := newTestObject("short.tar", size)
		c.ReadingWhole(o.obj)
		putBlocks(c, o, 0, 1, 2)
		c.ReadDone(o.obj, false)
		synctest.Wait()
		if names := wholeEntries(t, dir); len(names) != 0 || c.HasWholeFile(o.obj) {
			t.Fatalf("a read that ended short left whole-shard files %v", names)
		}

		var blocks []int64
		for i := int64(0); i*testBlock < size; i++ {
			blocks = append(blocks, i)
		}
		both := []testObject{newTestObject("two-readers.tar", size), newTestObject("third.tar", size)}
		for _, o := range both {
			c.ReadingWhole(o.obj)
			c.ReadingWhole(o.obj)
			putBlocks(c, o, blocks[:3]...)
			c.ReadDone(o.obj, false) // one of the two handles ends short
			putBlocks(c, o, blocks[3:]...)
			c.ReadDone(o.obj, true)
			synctest.Wait()
			mustReadWhole(t, c, o)
		}
		if !c.HasWholeFile(both[0].obj) {
			t.Fatalf("%s's file was evicted for %s's: the room of the build that ended short was not given back", both[0].obj.Key, both[1].obj.Key)
		}
	})
}

// TestCloseRemovesTheFilesBeingWritten: a file being written when the
// cache closes is removed, not left half written.
func TestCloseRemovesTheFilesBeingWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		c := openCache(t, buildConfig(dir, 4))
		o := newTestObject("closed.tar", 6*testBlock)
		c.ReadingWhole(o.obj)
		putBlocks(c, o, 0, 1, 2)
		if names := wholeEntries(t, dir); len(names) != 1 {
			t.Fatalf("whole-shard dir %v while a file is written, want its one temporary file", names)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if names := wholeEntries(t, dir); len(names) != 0 {
			t.Fatalf("Close left %v in the whole-shard dir", names)
		}
	})
}
