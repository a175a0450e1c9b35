package cache

import (
	"fmt"
	"io"
	"sync"

	"github.com/shardfs/shardfs/atomicfile"
	"github.com/shardfs/shardfs/store"
)

// A whole-shard file written as its shard is read. A handle that reads a
// shard from its first byte is most often reading it whole (a loader
// streaming tar shards, cat, a copy), so the first block of a shard put
// for read-ahead begins a draft: a temporary file the size of the shard
// into which every block put for it is written as well as into the ring,
// at its own offset. When the last block is in, the copier (promote.go)
// syncs the draft, sums it and commits it as the shard's whole-shard file:
// the shard's next open is passed through with no copy from the ring, as
// soon as the pass that read it is over. A draft whose handle closed
// before every block was put (a reader that stopped, blocks served from
// the ring and never put, blocks the read path did not hand over because
// the disk lagged) is discarded; a shard read whole whose blocks are all in
// the ring is then copied from there instead (ReadDone).

// maxDrafts bounds the drafts being written at once; a shard begun past it
// gets none.
const maxDrafts = 64

// draft is one whole-shard file being written.
type draft struct {
	name string
	obj  store.Object
	f    *atomicfile.File
	seq  uint64 // begun after every draft of a lower seq

	mu     sync.Mutex
	have   []uint64 // a bit per block written
	left   int64    // blocks not yet written
	failed bool     // a write failed: the draft is discarded
	ended  bool     // committed or discarded: nothing is written any more
}

// drafts are the drafts being written, by whole-shard file name.
type drafts struct {
	mu     sync.Mutex
	byName map[string]*draft
	begun  uint64
}

// beginDraft starts a draft of obj, whose first block is being put for
// read-ahead, unless the whole-shard tier already holds or is making it
// or has no room for it. With maxDrafts being written, the oldest is
// discarded: a draft whose last blocks never came (a reader still open
// that stopped reading) must not hold the tier's room for ever.
func (c *Cache) beginDraft(obj store.Object) {
	if c.whole == nil || !c.cfg.WholeFromReads {
		return
	}
	name := wholeName(c.version(obj))
	d := &c.drafts
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byName[name] != nil || c.whole.has(name) {
		return
	}
	if len(d.byName) >= maxDrafts {
		var oldest *draft
		for _, dr := range d.byName {
			if oldest == nil || dr.seq < oldest.seq {
				oldest = dr
			}
		}
		delete(d.byName, oldest.name)
		c.discard(oldest)
	}
	if !c.whole.reserve(name, obj.Size) {
		return
	}
	f, err := atomicfile.Create(c.whole.path(name))
	if err != nil {
		c.whole.unreserve(name, obj.Size)
		c.log.Warn("whole-shard file of a shard being read not begun", "key", obj.Key, "err", err)
		return
	}
	blocks := (obj.Size + c.cfg.BlockSize - 1) / c.cfg.BlockSize
	if d.byName == nil {
		d.byName = map[string]*draft{}
	}
	d.begun++
	d.byName[name] = &draft{name: name, obj: obj, f: f, seq: d.begun, have: make([]uint64, (blocks+63)/64), left: blocks}
	c.stats.wholeDrafts.Add(1)
}

// writeDraft writes data, the bytes of obj from off (whole blocks but
// perhaps the object's last), to obj's draft if it has one, and hands a
// draft that is then complete to the copier.
func (c *Cache) writeDraft(obj store.Object, off int64, data []byte) {
	d := &c.drafts
	d.mu.Lock()
	dr := d.byName[wholeName(c.version(obj))]
	d.mu.Unlock()
	if dr == nil {
		return
	}
	bs := c.cfg.BlockSize
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.ended || dr.failed {
		return
	}
	if _, err := dr.f.WriteAt(data, off); err != nil {
		dr.failed = true
		c.log.Warn("whole-shard file of a shard being read: write failed; discarded", "key", obj.Key, "err", err)
		return
	}
	for b := off / bs; b*bs < off+int64(len(data)); b++ {
		if w, bit := b/64, uint64(1)<<(b%64); dr.have[w]&bit == 0 {
			dr.have[w] |= bit
			dr.left--
		}
	}
	if dr.left == 0 {
		c.promoteLater(promotion{draft: dr})
	}
}

// hasDraft reports whether obj has a draft being written.
func (c *Cache) hasDraft(obj store.Object) bool {
	d := &c.drafts
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byName[wholeName(c.version(obj))] != nil
}

// endDraft takes the draft of obj out of the table and reports it; nil
// when there is none.
func (c *Cache) endDraft(obj store.Object) *draft {
	d := &c.drafts
	d.mu.Lock()
	defer d.mu.Unlock()
	name := wholeName(c.version(obj))
	dr := d.byName[name]
	delete(d.byName, name)
	return dr
}

// discard throws the draft away and gives its reservation back.
func (c *Cache) discard(dr *draft) {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.ended {
		return
	}
	dr.ended = true
	dr.f.Discard()
	c.whole.unreserve(dr.name, dr.obj.Size)
}

// commitDraft syncs a complete draft, sums it and makes it the shard's
// whole-shard file, remembered as checked: its bytes are the ones the
// read path fetched and checked, read back just now.
func (c *Cache) commitDraft(dr *draft) error {
	if c.endDraft(dr.obj) != dr {
		return nil // discarded meanwhile
	}
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.ended {
		return nil
	}
	dr.ended = true
	fail := func(err error) error {
		dr.f.Discard()
		c.whole.unreserve(dr.name, dr.obj.Size)
		return fmt.Errorf("whole-shard file of %s: %w", dr.obj.Key, err)
	}
	if dr.failed || dr.left != 0 {
		return fail(fmt.Errorf("incomplete"))
	}
	if err := dr.f.Sync(); err != nil {
		return fail(err)
	}
	h := newSum()
	if _, err := io.Copy(h, io.NewSectionReader(dr.f, 0, dr.obj.Size)); err != nil {
		return fail(err)
	}
	r := wholeRecord{Name: dr.name, Key: c.cfg.key(dr.obj), ETag: dr.obj.ETag, Size: dr.obj.Size, Sum: h.Sum32()}
	if err := c.whole.commit(r, dr.f); err != nil {
		return fmt.Errorf("whole-shard file of %s: %w", dr.obj.Key, err)
	}
	c.whole.markChecked(dr.name)
	return nil
}

// discardDrafts throws away every draft: the cache is closing.
func (c *Cache) discardDrafts() {
	d := &c.drafts
	d.mu.Lock()
	all := d.byName
	d.byName = nil
	d.mu.Unlock()
	for _, dr := range all {
		c.discard(dr)
	}
}
