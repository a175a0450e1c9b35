package store_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/shardfs/shardfs/store"
)

// TestS3NoResponseIsAStall: a server that accepts the connection and never
// answers must not hold a read past the stall timeout.
func TestS3NoResponseIsAStall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { <-done; c.Close() }() // hold it open, say nothing
		}
	}()
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	src, _ := store.ParseSource("s3://bucket/prefix")
	opts := store.DefaultS3Options()
	opts.Endpoint, opts.Region, opts.ForcePathStyle = "http://"+ln.Addr().String(), "us-east-1", true
	opts.StallTimeout = 300 * time.Millisecond
	s3, err := store.NewS3(context.Background(), src, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = s3.ReadRange(ctx, store.Object{Key: "k", Size: 100, ETag: `"e"`}, 0, make([]byte, 10))
	if err == nil {
		t.Fatal("read from a silent server succeeded")
	}
	if ctx.Err() != nil {
		t.Fatalf("read waited for the caller's deadline (%v) instead of the stall timeout: %v", time.Since(start), err)
	}
	if !store.Retryable(err) {
		t.Fatalf("a stall must be retryable: %v", err)
	}
}
