package gds

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/shardfs/shardfs/store"
)

// The errno of every failure, in one place (clients branch on them):
//
//	ENOTTY      command not a shardfs ioctl (or a different struct size)
//	EPROTO      ABI version in the struct is not ABIVersion
//	EINVAL      payload too short, flags set, string field not NUL-terminated
//	            or not zero-padded, bad shm name ("/", "..", empty), zero
//	            buffer size or lease length, shm file not a regular file,
//	            no shard path on the ctl file
//	ENOENT      shm file missing; shard path unknown; lease id unknown
//	ELOOP       shm name is a symlink (opened O_NOFOLLOW)
//	EISDIR      shm name is a directory
//	EPERM       shm file owned by another uid, or mode other than 0600
//	EACCES      the daemon itself may not open the shm file; WHOLE_FILE from a
//	            uid other than the daemon's (or root), which could not open it
//	EFBIG       buffer size above Config.MaxBufferSize
//	EMFILE      handle already holds MaxRegistrations buffers or MaxLeases leases
//	EBUSY       the caller's uid, or the mount, holds as many buffers or leases
//	            as its limit allows (limits.go)
//	ENOSPC      the lease would pin more ring bytes than the uid's or the
//	            mount's limit; shm file pages could not be allocated
//	ERANGE      shm file smaller than the size asked; file offset past the
//	            end of the shard; buffer offset+length past the buffer;
//	            SUBMIT entries outside the queue buffer or not 8-byte aligned
//	EBADF       buffer id not registered on this handle (unknown, unregistered,
//	            or another handle's)
//	EFAULT      the shm file shrank under the mapping
//	EOPNOTSUPP  LEASE on a mount without a cache ring; WHOLE_FILE on a mount
//	            without whole-shard files
//	ENODATA     LEASE range not (and not made) resident in the ring: use READ;
//	            WHOLE_FILE of a shard whose version is not held whole
//	EINTR       the request was interrupted
//	EIO         the shard could not be read (changed ETag, backend failure)
//	ENODEV      the server is closed
//	E2BIG       SUBMIT of more entries than MaxBatch
//	EAGAIN      SUBMIT would pass a bound on batch entries in flight (per
//	            handle, uid or mount): WAIT for completions, then submit again
//
// A batch entry's result is -errno from the same list (READ's errnos for
// the entry's own fields; ERANGE for a path outside the queue).
var (
	errEmptyPath = fmt.Errorf("no shard path given on the ctl file: %w", syscall.EINVAL)
	errNoFile    = fmt.Errorf("no such shard: %w", syscall.ENOENT)
)

// toErrno maps an error from a handler to the errno the caller sees.
func toErrno(err error) syscall.Errno {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return errno
	case errors.Is(err, ErrABIVersion):
		return syscall.EPROTO
	case errors.Is(err, ErrShortPayload), errors.Is(err, ErrBadField):
		return syscall.EINVAL
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	case errors.Is(err, store.ErrNotFound):
		return syscall.ENOENT
	}
	return syscall.EIO
}
