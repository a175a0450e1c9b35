package store_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shardfs/shardfs/store"
)

// Ranged reads one after another reuse one connection: a GET whose body
// is closed before the transport has seen its end costs the next GET a
// new connection (and, over TLS, a handshake), more than a small read's
// bytes, on the store and on the daemon.
func TestS3RangedReadsReuseTheirConnection(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var lo, hi int
		spec := strings.TrimPrefix(r.Header.Get("Range"), "bytes=")
		a, b, _ := strings.Cut(spec, "-")
		lo, _ = strconv.Atoi(a)
		hi, _ = strconv.Atoi(b)
		w.Header().Set("ETag", `"e"`)
		w.Header().Set("Content-Length", strconv.Itoa(hi-lo+1))
		w.Header().Set("Content-Range", "bytes "+a+"-"+b+"/"+strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(data[lo : hi+1])
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s3 := testS3(t, srv.URL)
	obj := store.Object{Key: "o.bin", Size: int64(len(data)), ETag: `"e"`}
	p := make([]byte, 4096)
	const reads = 20
	for i := range reads {
		off := int64(i * 3000)
		n, err := s3.ReadRange(context.Background(), obj, off, p)
		if err != nil || !bytes.Equal(p[:n], data[off:off+4096]) {
			t.Fatalf("read at %d: %d bytes, %v; not the object's bytes", off, n, err)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Fatalf("%d ranged reads, one after another, opened %d connections; want 1, reused", reads, got)
	}
}
