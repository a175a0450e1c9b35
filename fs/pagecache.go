package fs

import "fmt"

// PageCache says whether the kernel keeps the pages of shards read
// through the mount.
type PageCache uint8

const (
	// KeepPages (the default): pages stay in the kernel's page cache
	// across opens (FOPEN_KEEP_CACHE); a second read of a shard, or a
	// reader that mmaps it, is served by the kernel.
	KeepPages PageCache = iota
	// DirectIO: every read(2) goes to the daemon and is answered straight
	// into the reader's buffer (FOPEN_DIRECT_IO): no page is inserted,
	// copied out once and evicted, which is all a data set far larger than
	// RAM read once per epoch gets from the page cache.
	DirectIO
	// DirectBesideWholeFiles: DirectIO while the mount passes shards held
	// whole to the kernel, KeepPages where passthrough is refused. A shard
	// read whole through the daemon is written to its whole-shard file as
	// it is read, and its next open reads that file, whose pages the
	// kernel keeps: pages of the mount's own would hold the shard in
	// memory a second time and cost the daemon a copy into fresh page
	// cache on the cold pass. Where passthrough is refused, the mount's
	// pages are what spares a next epoch the daemon.
	DirectBesideWholeFiles
)

func (p PageCache) String() string {
	switch p {
	case DirectIO:
		return "direct"
	case DirectBesideWholeFiles:
		return "direct beside whole-shard files"
	}
	return "keep"
}

// ParsePageCache reads "keep" or "direct".
func ParsePageCache(s string) (PageCache, error) {
	switch s {
	case "keep":
		return KeepPages, nil
	case "direct":
		return DirectIO, nil
	}
	return KeepPages, fmt.Errorf("page cache policy %q: want keep or direct", s)
}

// readsDirect reports whether opens the daemon serves read directly
// (FOPEN_DIRECT_IO) rather than through pages the kernel keeps.
func (m *mountState) readsDirect() bool {
	switch m.opts.PageCache {
	case DirectIO:
		return true
	case DirectBesideWholeFiles:
		return m.passthrough.Load()
	}
	return false
}
