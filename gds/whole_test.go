package gds

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// newWholeFixture is a ring fixture whose cache keeps whole-shard files,
// with shard1 made whole from its ring blocks (as `shardfs warm` does) and
// shard0 not.
func newWholeFixture(t *testing.T) (*fixture, *cache.Cache) {
	t.Helper()
	f := newFixture(t, Config{})
	dir := t.TempDir()
	c, err := cache.Open(context.Background(), cache.Config{Dir: dir, Size: ringTarget, BlockSize: ringBlock, WholeShardPercent: 50}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f.files.cache, f.files.bs = c, ringBlock
	f.srv = NewServer(Config{BlockSize: ringBlock}, f.files, c, nil, nil)
	t.Cleanup(f.srv.Close)
	o := *f.object(shard1)
	if _, err := f.files.ReadAt(context.Background(), o, make([]byte, o.Size), 0); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.MakeWholeFile(context.Background(), o); !ok || err != nil {
		t.Fatalf("whole-shard file of %s not made: %v, %v", shard1, ok, err)
	}
	return f, c
}

// wholeAs asks WHOLE_FILE as uid.
func (f *fixture) wholeAs(uid uint32, obj *store.Object, path string) (WholeFileReq, syscall.Errno) {
	f.t.Helper()
	out, errno := f.ioctlAs(1, uid, obj, CmdWholeFile, WholeFileReq{Path: path})
	if errno != 0 {
		return WholeFileReq{}, errno
	}
	r, err := DecodeWholeFile(out)
	if err != nil {
		f.t.Fatalf("WHOLE_FILE reply: %v", err)
	}
	return r, 0
}

func TestWholeFileNamesTheShardsOwnFile(t *testing.T) {
	f, c := newWholeFixture(t)
	own := uint32(os.Geteuid())
	for name, ask := range map[string]struct {
		obj  *store.Object
		path string
	}{"ctl file": {nil, shard1}, "shard fd": {f.object(shard1), ""}, "leading slash": {nil, "/" + shard1}} {
		r, errno := f.wholeAs(own, ask.obj, ask.path)
		if errno != 0 {
			t.Fatalf("%s: WHOLE_FILE of a whole shard: %v", name, errno)
		}
		if r.Size != uint64(len(f.data[shard1])) || !filepath.IsAbs(r.File) || filepath.Dir(r.File) != c.WholeFilesDir() {
			t.Fatalf("%s: reply %+v; want size %d, a file in %s", name, r, len(f.data[shard1]), c.WholeFilesDir())
		}
		got, err := os.ReadFile(r.File)
		if err != nil || !bytes.Equal(got, f.data[shard1]) {
			t.Fatalf("%s: the named file does not hold the shard's bytes (%d bytes, %v)", name, len(got), err)
		}
	}
	if r, errno := f.wholeAs(0, nil, shard1); errno != 0 || r.File == "" {
		t.Errorf("root: %+v, %v; want the file", r, errno)
	}
}

func TestWholeFileRefusals(t *testing.T) {
	f, c := newWholeFixture(t)
	own := uint32(os.Geteuid())
	other := own + 4242
	if own == 0 {
		other = 4242
	}
	if r, errno := f.wholeAs(own, nil, "train/shard-000.tar"); errno != syscall.ENODATA {
		t.Errorf("shard not made whole: %+v, %v; want ENODATA", r, errno)
	}
	if r, errno := f.wholeAs(other, nil, shard1); errno != syscall.EACCES || r.File != "" {
		t.Errorf("another uid: %+v, %v; want EACCES and no path", r, errno)
	}
	if _, errno := f.wholeAs(own, nil, "no/such.tar"); errno != syscall.ENOENT {
		t.Errorf("unknown shard: %v, want ENOENT", errno)
	}
	if _, errno := f.wholeAs(own, nil, ""); errno != syscall.EINVAL {
		t.Errorf("no path on the ctl file: %v, want EINVAL", errno)
	}
	// A new version of the shard is not the file's version.
	changed := *f.object(shard1)
	changed.ETag += "-2"
	if _, errno := f.wholeAs(own, &changed, ""); errno != syscall.ENODATA {
		t.Errorf("another ETag of a whole shard: %v, want ENODATA", errno)
	}
	// Evicted (unlinked) under the daemon: never a path that does not open.
	r, _ := f.wholeAs(own, nil, shard1)
	if err := os.Remove(r.File); err != nil {
		t.Fatal(err)
	}
	if r, errno := f.wholeAs(own, nil, shard1); errno != syscall.ENODATA {
		t.Errorf("after the file was removed: %+v, %v; want ENODATA", r, errno)
	}
	if c.HasWholeFile(*f.object(shard1)) {
		t.Errorf("the cache still lists the removed file")
	}
}

func TestWholeFileWithoutTheTier(t *testing.T) {
	ring, _ := newRingFixture(t, Config{}) // a ring, no whole-shard files
	plain := newFixture(t, Config{})       // no cache at all
	for name, f := range map[string]*fixture{"ring only": ring, "no cache": plain} {
		if _, errno := f.wholeAs(uint32(os.Geteuid()), nil, shard1); errno != syscall.EOPNOTSUPP {
			t.Errorf("%s: %v, want EOPNOTSUPP", name, errno)
		}
		if capabilities(t, f.srv).WholeFiles {
			t.Errorf("%s: capabilities say whole_files", name)
		}
	}
	f, _ := newWholeFixture(t)
	if got := capabilities(t, f.srv); !got.WholeFiles || got.Commands["whole_file"] != CmdWholeFile {
		t.Errorf("capabilities with whole files: %+v", got)
	}
}

func TestWholeFileABI(t *testing.T) {
	if CmdWholeFile != 0xC810BD08 || wholeSize != 2064 || wholePathAt != 16 || wholeFileAt != 1040 {
		t.Errorf("WHOLE_FILE %#x, %d bytes, path at %d, file at %d; the README says 0xC810BD08, 2064, 16, 1040",
			CmdWholeFile, wholeSize, wholePathAt, wholeFileAt)
	}
	r := WholeFileReq{Path: "a/b.tar", Size: 1 << 40, File: "/cache/shards/0123"}
	p, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeWholeFile(p); err != nil || got != r {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	le.PutUint32(p, 1)
	if _, err := DecodeWholeFile(p); !errors.Is(err, ErrABIVersion) {
		t.Errorf("version 1: %v, want ErrABIVersion", err)
	}
	le.PutUint32(p, 2)
	p[4] = 1
	if _, err := DecodeWholeFile(p); !errors.Is(err, ErrBadField) {
		t.Errorf("flags: %v, want ErrBadField", err)
	}
	p[4] = 0
	f, _ := newWholeFixture(t)
	out := make([]byte, wholeSize)
	if _, errno := f.srv.Ioctl(context.Background(), 1, 0, 1, nil, CmdWholeFile, p[:wholeSize-1], out); errno != syscall.EINVAL {
		t.Errorf("short payload: %v, want EINVAL", errno)
	}
}
