package fs

import (
	"context"
	"errors"
	"syscall"

	"github.com/shardfs/shardfs/store"
)

// errnoFor is the one place where errors become errno. A read that fails
// for any reason the caller cannot fix is EIO, never ENOENT: the file is
// there, its bytes could not be had (or changed under the mount).
func errnoFor(err error) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.Is(err, store.ErrInvalidRange):
		return syscall.EINVAL
	default:
		return syscall.EIO
	}
}
