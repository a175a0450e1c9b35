package gds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"syscall"

	"github.com/shardfs/shardfs/store"
)

// read handles READ: the mount's read path fills the registered buffer
// directly, so the bytes are copied once (cache or network -> buffer).
func (s *Server) read(ctx context.Context, handle uint64, obj *store.Object, in, out []byte) ([]byte, error) {
	if len(out) < readSize {
		return nil, fmt.Errorf("reply room %d bytes: %w", len(out), ErrShortPayload)
	}
	req, err := DecodeRead(in)
	if err != nil {
		return nil, err
	}
	o, err := s.resolve(obj, req.Path)
	if err != nil {
		return nil, err
	}
	if req.FileOffset > uint64(o.Size) {
		return nil, fmt.Errorf("offset %d past the end of %s (%d bytes): %w", req.FileOffset, o.Key, o.Size, syscall.ERANGE)
	}
	b, err := s.buffer(handle, req.BufID)
	if err != nil {
		return nil, err
	}
	n, err := s.readInto(ctx, b, o, req)
	if err != nil {
		return nil, err
	}
	req.BytesRead = n
	return req.Encode()
}

// readInto copies min(Length, bytes left in the shard) into b at BufOffset.
func (s *Server) readInto(ctx context.Context, b *buffer, o store.Object, req ReadReq) (n uint64, err error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.mem == nil {
		return 0, fmt.Errorf("buffer %d unregistered: %w", req.BufID, syscall.EBADF)
	}
	size := uint64(len(b.mem))
	if req.BufOffset > size || req.Length > size-req.BufOffset {
		return 0, fmt.Errorf("buffer range %d+%d past its %d bytes: %w", req.BufOffset, req.Length, size, syscall.ERANGE)
	}
	n = min(req.Length, uint64(o.Size)-req.FileOffset)
	if n == 0 {
		return 0, nil
	}
	if err := b.stillBacked(); err != nil {
		return 0, err
	}
	// The client can still truncate its file during the copy; a fault in
	// this goroutine then becomes an error instead of killing the daemon.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("buffer %d faulted during copy (%v): %w", req.BufID, r, syscall.EFAULT)
		}
	}()
	dst := b.mem[req.BufOffset : req.BufOffset+n]
	got, err := s.files.ReadAt(ctx, o, dst, int64(req.FileOffset))
	if err != nil && !(errors.Is(err, io.EOF) && uint64(got) == n) {
		s.log.Warn("gds read failed", "key", o.Key, "offset", req.FileOffset, "length", n, "err", err)
		return 0, fmt.Errorf("read %s at %d: %w", o.Key, req.FileOffset, err)
	}
	if uint64(got) != n {
		return 0, fmt.Errorf("read %s at %d: %d of %d bytes: %w", o.Key, req.FileOffset, got, n, syscall.EIO)
	}
	return n, nil
}
