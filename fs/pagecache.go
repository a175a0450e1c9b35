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
)

func (p PageCache) String() string {
	if p == DirectIO {
		return "direct"
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
