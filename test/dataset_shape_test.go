//go:build e2e

package test

import (
	"strings"
	"testing"
)

// TestDatasetHasWhatTheChecksNeed guards the data set every end-to-end
// check reads: at least 20 shards, one over 200 MiB, a nested prefix, an
// empty object, and a key with spaces and non-ASCII characters. A smaller
// data set would let those checks pass without covering these cases.
func TestDatasetHasWhatTheChecksNeed(t *testing.T) {
	var shards, nested int
	for _, o := range e2e.objects {
		if strings.HasSuffix(o.key, ".tar") {
			shards++
		}
		if strings.Count(o.key, "/") >= 2 {
			nested++
		}
	}
	if shards < 20 {
		t.Errorf("%d shards, want at least 20", shards)
	}
	if nested == 0 {
		t.Error("no object under a nested prefix (a/b/key)")
	}
	if o := mustLookup(t, largeKey); o.size <= 200<<20 {
		t.Errorf("%s is %d bytes, want over 200 MiB", largeKey, o.size)
	}
	if o := mustLookup(t, emptyKey); o.size != 0 {
		t.Errorf("%s is %d bytes, want empty", emptyKey, o.size)
	}
	if !strings.Contains(oddKey, " ") || strings.ToValidUTF8(oddKey, "") != oddKey || len([]rune(oddKey)) == len(oddKey) {
		t.Errorf("%q is not a key with spaces and non-ASCII characters", oddKey)
	}
	mustLookup(t, oddKey)
}
