package wholefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// BadFile is a whole-shard file that failed its check and was deleted.
type BadFile struct {
	File   string
	Key    string // "" for a file the journal does not vouch for
	Reason string
}

// Report is what Verify found.
type Report struct {
	Checked int64 // files read and summed
	Good    int64
	Bad     []BadFile // deleted: a later read is served from the ring or the store
}

// Inspect counts the files of cacheDir that the journal vouches for and
// that are present with their record's size, and their bytes. It takes no
// lock and changes nothing: a tier open in another process may be making
// or dropping files meanwhile.
func Inspect(cacheDir string) (files, bytes int64) {
	dir := wholeDir(cacheDir)
	recs, err := readJournal(filepath.Join(dir, JournalName))
	if err != nil {
		return 0, 0
	}
	for name, r := range recs {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() && fi.Size() == r.Size {
			files++
			bytes += r.Size
		}
	}
	return files, bytes
}

// Verify sums every whole-shard file of cacheDir against its record and
// deletes those that fail or have none. The caller holds the dir's lock:
// no tier is open on it.
func Verify(cacheDir string) (Report, error) {
	var rep Report
	dir := wholeDir(cacheDir)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return rep, nil
	}
	recs, err := readJournal(filepath.Join(dir, JournalName))
	if err != nil {
		return rep, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return rep, fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if !isName(name) {
			continue
		}
		path := filepath.Join(dir, name)
		bad := BadFile{File: path}
		r, ok := recs[name]
		if !ok {
			bad.Reason = "no journal record vouches for it"
		} else {
			bad.Key = r.Key
			rep.Checked++
			if bad.Reason = checkFile(path, r); bad.Reason == "" {
				rep.Good++
				continue
			}
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return rep, fmt.Errorf("drop bad whole-shard file: %w", err)
		}
		rep.Bad = append(rep.Bad, bad)
	}
	return rep, nil
}

// checkFile opens the whole-shard file at path and checks it against r
// (checkWhole): "" when it passes, else why not.
func checkFile(path string, r record) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	return checkWhole(f, r)
}
