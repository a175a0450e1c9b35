//go:build e2e

package test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// flipByte flips one bit of the byte at off in the file at path, as rot
// on the disk (or a hand) would.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x20
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// Warm 10 shards, flip one byte of one whole-shard file, then read every
// shard as a new user would. With --passthrough off the daemon never reads
// the whole-shard files (its reads come from the ring's checked blocks or
// the store), so every shard is right and nothing is checked. With the
// defaults (passthrough on) the first open of each file checks it: the
// rotten one is dropped, counted and logged once, its shard read right
// through the daemon; the others are passed to the kernel, checked once
// each, not again at a second read. The shard read whole through the
// daemon is kept whole again, from the ring's checked blocks, and passed
// through at the second read. cache verify then finds nothing bad.
func TestWholeFileRotIsNeverPassedThrough(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shards := e2e.smallShards()[:10]
	flags := warmWhole(t, dir, "shard-00000[0-9].tar")
	bad := shards[4]
	path := wholeFileOf(t, dir, bad)
	flipByte(t, path, bad.size/2)

	m := mountShardfs(t, e2e.source(), append(flags, "--passthrough", "off")...)
	checkShards(t, m.dir, shards)
	st := mountStats(t, m.dir)
	if st["passthrough_opens_total"] != 0 || st["cache_whole_checks_total"] != 0 {
		t.Errorf("--passthrough off: %v opens passed through, %v whole-shard files checked; want 0 and 0 (the daemon never reads them)",
			st["passthrough_opens_total"], st["cache_whole_checks_total"])
	}
	m.stop(t)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the rotten file is gone after a mount with --passthrough off, which never opens it: %v", err)
	}

	m = mountShardfs(t, e2e.source(), flags...)
	checkShards(t, m.dir, shards)
	st = mountStats(t, m.dir)
	t.Logf("defaults: passthrough=%v, %v opens passed through, %v by the daemon, %v whole-shard files checked, %v dropped for their checksum",
		st["passthrough"], st["passthrough_opens_total"], st["daemon_opens_total"], st["cache_whole_checks_total"], st["cache_whole_checksum_failures_total"])
	if st["passthrough"] != 1 {
		t.Fatalf("passthrough is off on this mount: the test needs it on\n%s", m.output.String())
	}
	n := float64(len(shards))
	if st["cache_whole_checksum_failures_total"] != 1 || st["cache_whole_checks_total"] != n ||
		st["passthrough_opens_total"] != n-1 || st["daemon_opens_total"] != 1 {
		t.Errorf("%v files dropped for their checksum, %v checked, %v opens passed through, %v by the daemon; want 1, %v, %v, 1 (%s)",
			st["cache_whole_checksum_failures_total"], st["cache_whole_checks_total"], st["passthrough_opens_total"], st["daemon_opens_total"], n, n-1, bad.key)
	}
	if c := strings.Count(m.output.String(), "fails its check"); c != 1 {
		t.Errorf("the drop was logged %d times, want once:\n%s", c, m.output.String())
	}
	if sum, size, err := fileSHA256(path); err == nil && (sum != bad.sha256 || size != bad.size) {
		t.Errorf("the rotten file %s is still there: %d bytes, sha256 %s", path, size, sum)
	}

	// The shard read whole through the daemon is made whole again, from
	// the ring's checked blocks, summed as they are copied; a second read
	// of every shard checks no file again and passes every shard through.
	waitStat(t, m.dir, "cache_whole_files", n)
	before := st["passthrough_opens_total"]
	checkShards(t, m.dir, shards)
	st = mountStats(t, m.dir)
	if st["cache_whole_checks_total"] != n || st["cache_whole_checksum_failures_total"] != 1 || st["passthrough_opens_total"]-before != n {
		t.Errorf("after a second read: %v checked, %v dropped, %v opens passed through; want %v (the file made again was summed as it was copied), 1, %v",
			st["cache_whole_checks_total"], st["cache_whole_checksum_failures_total"], st["passthrough_opens_total"]-before, n, n)
	}
	m.stop(t)

	// Every file is good: the ten, and any shard a next-shard read-ahead
	// fetched whole meanwhile.
	r := runShardfs(e2e.env(), warmTimeout, "cache", "verify", "--cache-dir", dir)
	var checked, good int
	line := regexp.MustCompile(`(\d+) whole-shard files checked, (\d+) good, 0 bad`).FindStringSubmatch(r.stdout)
	if line != nil {
		checked, _ = strconv.Atoi(line[1])
		good, _ = strconv.Atoi(line[2])
	}
	if r.code != 0 || line == nil || good != checked || good < len(shards) {
		t.Errorf("cache verify after the mount dropped the rotten file and made it again: exit %d; want 0, at least %d files checked, all good\n%s%s", r.code, len(shards), r.stdout, r.stderr)
	}
}
