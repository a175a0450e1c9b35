package store_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardfs/shardfs/store"
)

// TestS3NoResponseIsAStall: a server that accepts the connection and never
// answers must not hold a read past the stall timeout. The read fails as a
// stall, retryable, once the stall timeout has passed, not at the caller's
// deadline.
//
// The client talks to the silent server over an in-memory connection in a
// synctest bubble: time moves only once the read is blocked on the server,
// so the read's length is measured in the bubble's time, exactly.
func TestS3NoResponseIsAStall(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	synctest.Test(t, func(t *testing.T) {
		src, _ := store.ParseSource("s3://bucket/prefix")
		opts := store.DefaultS3Options()
		opts.Endpoint, opts.Region, opts.ForcePathStyle = "http://s3.test", "us-east-1", true
		opts.StallTimeout = 300 * time.Millisecond
		opts.Dial = func(context.Context, string, string) (net.Conn, error) {
			client, server := net.Pipe()
			go func() {
				// Take the request, say nothing, hang up once the client does.
				io.Copy(io.Discard, server)
				server.Close()
			}()
			return client, nil
		}
		s3, err := store.NewS3(context.Background(), src, opts)
		if err != nil {
			t.Fatal(err)
		}
		const callerDeadline = 10 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), callerDeadline)
		defer cancel()
		start := time.Now()
		_, err = s3.ReadRange(ctx, store.Object{Key: "k", Size: 100, ETag: `"e"`}, 0, make([]byte, 10))
		took := time.Since(start)
		if err == nil {
			t.Fatal("read from a silent server succeeded")
		}
		if took > opts.StallTimeout {
			t.Fatalf("read from a silent server returned after %v, past the stall timeout %v (caller's deadline %v): %v", took, opts.StallTimeout, callerDeadline, err)
		}
		if !errors.Is(err, store.ErrStalled) {
			t.Fatalf("read from a silent server failed, but not as a stall: %v", err)
		}
		if !store.Retryable(err) {
			t.Fatalf("a stall must be retryable: %v", err)
		}
	})
}
