package cache

import (
	"strings"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	h := slotHeader{Generation: 7, Index: 3, Length: 1234, ChunkSize: chunkSizeFor(4096), Chunks: chunkSums{0xdeadbeef}, Grains: grainSums{1, 2, maxGrains - 1: 0xfeedface},
		Object: objectIDOf("s3://b/p", "k.tar"), Namespace: "s3://b/p", Key: "k.tar", ETag: `"e"`}
	buf := alignedBuffer(headerSize)
	if err := h.encode(buf); err != nil {
		t.Fatal(err)
	}
	got, st := decodeHeader(buf, 4096)
	if st != headerValid || got != h {
		t.Fatalf("decode = %+v (%v), want %+v", got, st, h)
	}
	if _, st := decodeHeader(buf, 1000); st != headerDamaged {
		t.Fatal("a length over the block size decoded as valid")
	}
	buf[100] ^= 1
	if _, st := decodeHeader(buf, 4096); st != headerDamaged {
		t.Fatal("a flipped bit decoded as valid")
	}
	buf[100] ^= 1
	if _, st := decodeHeader(buf, 8<<20); st != headerDamaged {
		t.Fatal("a header of another chunk size decoded as valid")
	}
	// The longest names S3 allows fit: a 1024-byte key under a 1024-byte
	// prefix of a 63-byte bucket, and a multipart ETag.
	s3 := h
	s3.Namespace = "s3://" + strings.Repeat("b", 63) + "/" + strings.Repeat("p", 1024)
	s3.Key = strings.Repeat("k", 1024)
	s3.ETag = `"` + strings.Repeat("e", 32) + `-10000"`
	if err := s3.encode(buf); err != nil {
		t.Fatalf("the longest S3 names do not fit a header: %v", err)
	}
	if got, st := decodeHeader(buf, 4096); st != headerValid || got != s3 {
		t.Fatal("a header with the longest S3 names does not decode as written")
	}
	long := h
	long.Key = strings.Repeat("k", headerSize)
	if err := long.encode(buf); err == nil {
		t.Fatal("a key longer than a header encoded")
	}
}

func FuzzDecodeHeader(f *testing.F) {
	buf := make([]byte, headerSize)
	slotHeader{Length: 10, ChunkSize: chunkSizeFor(1 << 20), Key: "a", ETag: "b"}.encode(buf)
	f.Add(buf)
	f.Add(make([]byte, headerSize))
	f.Fuzz(func(t *testing.T, src []byte) {
		h, st := decodeHeader(src, 1<<20)
		if st != headerValid {
			return
		}
		again := make([]byte, headerSize)
		if err := h.encode(again); err != nil {
			t.Fatalf("a decoded header does not encode: %v", err)
		}
		if h2, st2 := decodeHeader(again, 1<<20); st2 != headerValid || h2 != h {
			t.Fatalf("re-decode = %+v, want %+v", h2, h)
		}
	})
}
