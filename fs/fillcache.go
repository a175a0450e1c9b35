package fs

import "syscall"

// CmdFillCache is the ioctl a reader sends on an open shard to say it
// reads to fill the cache (`shardfs warm` through a mount): _IO(0xBD,
// 0x20), the type byte of the GPU interface's ioctls, no payload. The
// read path then waits for the cache to take every block it fetches,
// rather than skipping a disk that lags the network, while the handle is
// open.
const CmdFillCache = uint32(0xBD<<8 | 0x20)

// CacheFiller is a Reader that can be told its handle fills the cache.
type CacheFiller interface {
	FillCache()
}

// fillCache tells the handle's reader that it fills the cache. A read
// path that never skips the cache has nothing to change.
func (h *fileHandle) fillCache() syscall.Errno {
	if f, ok := h.readerFor().(CacheFiller); ok {
		f.FillCache()
	}
	return 0
}
