package store_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shardfs/shardfs/store"
)

func TestManifestRoundTrip(t *testing.T) {
	objs := []store.Object{
		{Key: "a/x.tar", Size: 10, ETag: `"e1"`, ModTime: time.Unix(1700000000, 0).UTC()},
		{Key: "sp ace/ü.tar", Size: 0, ETag: `"e2"`, ModTime: time.Unix(1700000001, 0).UTC()},
	}
	var buf bytes.Buffer
	if err := store.WriteManifest(&buf, objs); err != nil {
		t.Fatal(err)
	}
	got, err := store.ReadManifest(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, objs) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, objs)
	}
}

func TestManifestRejectsLinesWithoutETag(t *testing.T) {
	_, err := store.ReadManifest(strings.NewReader(`{"key":"a","size":1}` + "\n"))
	if err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("err = %v, want a complaint about line 1", err)
	}
}
