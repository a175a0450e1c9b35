package gds

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/store"
)

// WholeFiles is the cache's tier of complete shards kept as single files
// (the mount's *cache.Cache). A file is named by its object version and
// never rewritten, and eviction only unlinks it: a path handed out either
// opens to that version's bytes or does not open at all.
type WholeFiles interface {
	// OpenWholeFile opens the file of obj's version when the tier holds
	// all of it.
	OpenWholeFile(obj store.Object) (*os.File, bool)
	// WholeFilesDir is the tier's directory, "" when it is off.
	WholeFilesDir() string
}

var (
	_ WholeFiles = (*cache.Cache)(nil)
	_ Leaser     = (*cache.Cache)(nil)
)

// wholeFilesOf is the whole-file tier behind a Leaser, nil when it has
// none: the mount passes its cache once, as the Leaser.
func wholeFilesOf(l Leaser) WholeFiles {
	w, ok := l.(WholeFiles)
	if !ok || noCache(l) || w.WholeFilesDir() == "" {
		return nil
	}
	return w
}

// wholeFile handles WHOLE_FILE: the path and size of the shard's
// whole-shard file, checked to open now, for a caller that may open it.
//
// The files are 0600 in a 0700 directory of the daemon's uid: a caller of
// another uid (root aside) could not open the path, so it gets EACCES and
// reads through READ or LEASE instead, never a path it cannot use. The
// answer names the version the handle reads (the fd's pinned version, or
// the listing's current one on the ctl file); a file evicted after the
// answer fails the client's open, and the client falls back.
func (s *Server) wholeFile(uid uint32, obj *store.Object, in, out []byte) ([]byte, error) {
	if len(out) < wholeSize {
		return nil, fmt.Errorf("reply room %d bytes: %w", len(out), ErrShortPayload)
	}
	req, err := DecodeWholeFile(in)
	if err != nil {
		return nil, err
	}
	if s.whole == nil {
		return nil, fmt.Errorf("no whole-shard files on this mount: %w", syscall.EOPNOTSUPP)
	}
	o, err := s.resolve(obj, req.Path)
	if err != nil {
		return nil, err
	}
	if uid != 0 && uid != s.owner {
		return nil, fmt.Errorf("uid %d cannot open the daemon's (uid %d) cache files: %w", uid, s.owner, syscall.EACCES)
	}
	f, ok := s.whole.OpenWholeFile(o)
	if !ok {
		return nil, fmt.Errorf("%s is not held whole: %w", o.Key, syscall.ENODATA)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() != o.Size {
		return nil, fmt.Errorf("whole-shard file of %s unusable (%v, want %d bytes): %w", o.Key, err, o.Size, syscall.ENODATA)
	}
	// The ring's paths are absolute (ring_open.go); so is this one, in the
	// daemon's mount namespace, which a client on the same host shares.
	file, err := filepath.Abs(f.Name())
	if err != nil {
		return nil, fmt.Errorf("whole-shard file of %s: %v: %w", o.Key, err, syscall.ENODATA)
	}
	return WholeFileReq{Path: req.Path, Size: uint64(o.Size), File: file}.Encode()
}
