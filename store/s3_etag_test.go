package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shardfs/shardfs/store"
)

// etaglessS3 answers ListObjectsV2 without ETags, and HEAD with the ETag
// headOK says, as some gateways do.
func etaglessS3(t *testing.T, headETag string) (*store.S3, *atomic.Int32) {
	t.Helper()
	var heads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bucket</Name><Prefix></Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>
<Contents><Key>a.tar</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified><Size>10</Size></Contents>
<Contents><Key>b.tar</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified><ETag>"bee"</ETag><Size>20</Size></Contents>
</ListBucketResult>`)
		case r.Method == http.MethodHead:
			heads.Add(1)
			if headETag != "" {
				w.Header().Set("ETag", headETag)
			}
			w.Header().Set("Content-Length", "10")
			w.Header().Set("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")
		default:
			http.Error(w, "unexpected "+r.Method+" "+r.URL.String(), http.StatusTeapot)
		}
	}))
	t.Cleanup(srv.Close)
	s3 := testS3(t, srv.URL)
	return s3, &heads
}

// An object listed without an ETag takes its ETag from a HEAD; one that
// has none there either is refused with one line naming it, never given
// a version that every content of the key would share.
func TestS3ListedObjectWithoutETag(t *testing.T) {
	s3, heads := etaglessS3(t, `"from-head"`)
	objs, err := s3.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].ETag != `"from-head"` || objs[1].ETag != `"bee"` || heads.Load() != 1 {
		t.Fatalf("listing %+v after %d HEADs, want a.tar's ETag from one HEAD", objs, heads.Load())
	}

	s3, _ = etaglessS3(t, "")
	_, err = s3.List(context.Background())
	if !errors.Is(err, store.ErrNoETag) || !strings.Contains(err.Error(), "a.tar") {
		t.Fatalf("listing with no ETag anywhere: %v, want ErrNoETag naming a.tar", err)
	}
	if _, err := s3.ReadRange(context.Background(), store.Object{Key: "a.tar", Size: 10}, 0, make([]byte, 4)); !errors.Is(err, store.ErrNoETag) {
		t.Fatalf("read of an object without ETag: %v, want ErrNoETag", err)
	}
}

// testS3 is an S3 store of s3://bucket/ at url, path-style, with static
// credentials.
func testS3(t *testing.T, url string) *store.S3 {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	src, _ := store.ParseSource("s3://bucket/")
	opts := store.DefaultS3Options()
	opts.Endpoint, opts.Region, opts.ForcePathStyle = url, "us-east-1", true
	s3, err := store.NewS3(context.Background(), src, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s3
}
