package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// Both durabilities replace the file with exactly the bytes written, mode
// 0600 whatever the umask, and leave nothing beside it.
func TestWriteReplacesTheFile(t *testing.T) {
	for _, d := range []Durability{Atomic, Durable} {
		t.Run(d.String(), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.json")
			if err := os.WriteFile(path, []byte("old and longer"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := WriteFile(path, d, []byte("new")); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != "new" {
				t.Fatalf("%s holds %q, %v; want \"new\"", path, got, err)
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v; want 0600", fi.Mode().Perm())
			}
			if n := names(t, dir); !slices.Equal(n, []string{"f.json"}) {
				t.Errorf("directory holds %v; want only f.json", n)
			}
		})
	}
}

// A write that fails part way leaves the old file as it was and no
// temporary file.
func TestFailedWriteLeavesTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "listing")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("source gone")
	err := Write(path, Durable, func(w io.Writer) error {
		w.Write(make([]byte, 3<<20)) // past the buffer: bytes reach the file
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v; want the writer's error", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("%s holds %d bytes after a failed write; want the old 3", path, len(got))
	}
	if n := names(t, dir); !slices.Equal(n, []string{"listing"}) {
		t.Errorf("directory holds %v; want only listing", n)
	}
}

// A link planted at the path is replaced; the file it points to is never
// written.
func TestWriteReplacesALinkNotItsTarget(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "owner.json")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, Atomic, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "precious" {
		t.Errorf("the link's target now holds %q", got)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("%s is %v, %v; want a regular file", path, fi.Mode(), err)
	}
}

// What a killed writer leaves (a File never committed nor discarded) has
// IsTemp's form; RemoveTemps of its path removes it and nothing else.
func TestRemoveTempsRemovesWhatAKilledWriterLeft(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0a1b.jsonl")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("torn"))
	left := filepath.Base(f.Name())
	if !IsTemp(left) {
		t.Fatalf("IsTemp(%q) = false for a file Create made", left)
	}
	keep := []string{"0a1b.jsonl", ".0a1b.jsonl.bak", ".0a1b.jsonl", ".other.jsonl42", "x9"}
	for _, n := range keep {
		if IsTemp(n) && n != ".other.jsonl42" {
			t.Errorf("IsTemp(%q) = true", n)
		}
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveTemps(path); err != nil {
		t.Fatal(err)
	}
	got := names(t, dir)
	slices.Sort(keep)
	if !slices.Equal(got, keep) {
		t.Errorf("after RemoveTemps the directory holds %v; want %v (%s removed)", got, keep, left)
	}
}

// A file written with O_DIRECT from aligned buffers, its short tail
// through the page cache, holds every byte once committed.
func TestDirectWritesThenATailHoldEveryByte(t *testing.T) {
	path := filepath.Join(t.TempDir(), "direct")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Discard()
	if err := f.Direct(true); err != nil {
		t.Skipf("the test dir's filesystem refuses O_DIRECT: %v", err)
	}
	const chunk = 64 << 10
	raw := make([]byte, 3*chunk+4096)
	buf := raw[4096-int(uintptr(unsafe.Pointer(&raw[0]))%4096):][:3*chunk] // aligned
	want := make([]byte, 0, 2*chunk+100)
	for i := range 2 {
		p := buf[i*chunk : (i+1)*chunk]
		for j := range p {
			p[j] = byte(i*7 + j)
		}
		if _, err := f.Write(p); err != nil {
			t.Fatalf("direct write of aligned chunk %d: %v", i, err)
		}
		want = append(want, p...)
	}
	tail := buf[2*chunk : 2*chunk+100]
	for j := range tail {
		tail[j] = byte(j * 3)
	}
	if err := f.Direct(false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(tail); err != nil {
		t.Fatalf("write of the 100-byte tail after Direct(false): %v", err)
	}
	want = append(want, tail...)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(Durable); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("committed file: %d bytes, err %v; want the %d bytes written", len(got), err, len(want))
	}
}

// An Unsynced commit puts the new file in place as the others do, and a
// Discard after it leaves it there.
func TestUnsyncedCommitPutsTheFileInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("later"), 5); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("first"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(Unsynced); err != nil {
		t.Fatal(err)
	}
	f.Discard()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "firstlater" {
		t.Fatalf("after an Unsynced commit and a Discard, %s holds %q, %v; want \"firstlater\"", path, got, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("%d entries beside the file, want none", len(entries)-1)
	}
}
