package store_test

import (
	"bytes"
	"fmt"
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

// A manifest larger than one decoding chunk comes back whole and in order,
// and a bad line far into it is named by its number.
func TestManifestAcrossChunks(t *testing.T) {
	var objs []store.Object
	for i := range 30000 {
		objs = append(objs, store.Object{Key: fmt.Sprintf("d/%06d.tar", i), Size: int64(i), ETag: fmt.Sprintf(`"%d"`, i), ModTime: time.Unix(int64(i), 0).UTC()})
	}
	var buf bytes.Buffer
	if err := store.WriteManifest(&buf, objs); err != nil {
		t.Fatal(err)
	}
	if buf.Len() < 2<<20 {
		t.Fatalf("manifest of %d bytes does not span chunks", buf.Len())
	}
	got, err := store.ReadManifest(bytes.NewReader(buf.Bytes()))
	if err != nil || !reflect.DeepEqual(got, objs) {
		t.Fatalf("round trip of %d objects: %d back, %v", len(objs), len(got), err)
	}
	lines := strings.Split(buf.String(), "\n")
	lines[25000-1] = `{"key":"x","size":1}`
	_, err = store.ReadManifest(strings.NewReader(strings.Join(lines, "\n")))
	if err == nil || !strings.Contains(err.Error(), "line 25000:") {
		t.Fatalf("err = %v, want line 25000 named", err)
	}
}

func TestManifestRefusesHugeLine(t *testing.T) {
	huge := `{"key":"` + strings.Repeat("a", 2<<20) + `","size":1,"etag":"e"}` + "\n"
	_, err := store.ReadManifest(strings.NewReader(`{"key":"a","size":1,"etag":"e"}` + "\n" + huge))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want line 2 refused as too long", err)
	}
}
