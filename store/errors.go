package store

import "errors"

// Sentinel errors. Backends wrap them with %w and the key or bucket they
// concern; callers test them with errors.Is. The FUSE layer maps them to
// errno in one place (fs/errno.go).
var (
	// ErrNotFound: the object (or the directory SOURCE) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrNoBucket: the bucket does not exist.
	ErrNoBucket = errors.New("no such bucket")
	// ErrChanged: the object no longer has the ETag it was listed with
	// (HTTP 412 on an If-Match GET). Its bytes must not be served.
	ErrChanged = errors.New("object changed since it was listed")
	// ErrDenied: credentials were rejected or lack permission.
	ErrDenied = errors.New("access denied")
	// ErrNoCredentials: the AWS credential chain found nothing to sign with.
	ErrNoCredentials = errors.New("no AWS credentials found")
	// ErrUnreachable: the endpoint could not be reached at all.
	ErrUnreachable = errors.New("endpoint unreachable")
	// ErrInvalidRange: a read outside the object.
	ErrInvalidRange = errors.New("invalid range")
	// ErrNoETag: the store gave an object no ETag, so its versions could
	// not be told apart.
	ErrNoETag = errors.New("the store returned no ETag")
)

// Retryable reports whether err is a transient failure worth retrying:
// anything but the sentinels above and context cancellation.
// The classification of transport errors lives with each backend, which
// marks permanent failures with a sentinel.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	for _, permanent := range []error{ErrNotFound, ErrNoBucket, ErrChanged, ErrDenied, ErrNoCredentials, ErrInvalidRange, ErrNoETag} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	return !isContextError(err)
}
