package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
)

// cacheOwner is written into a cache dir by the mount that owns it, so
// that `shardfs warm` can hand its work to that mount instead of failing
// on the dir's lock.
type cacheOwner struct {
	Source     string `json:"source"`
	MountPoint string `json:"mountpoint"`
	PID        int    `json:"pid"`
}

const ownerFile = "owner.json"

func writeCacheOwner(dir string, o cacheOwner) (remove func(), err error) {
	path := filepath.Join(dir, ownerFile)
	raw, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	// Written to a new private file and renamed into place: a link planted
	// at path is replaced, never written through.
	f, err := os.CreateTemp(dir, ownerFile+".*")
	if err != nil {
		return nil, err
	}
	_, err = f.Write(raw)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	return func() { os.Remove(path) }, nil
}

// readCacheOwner returns the live mount that owns dir, if any.
func readCacheOwner(dir string) (cacheOwner, bool) {
	var o cacheOwner
	raw, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil || json.Unmarshal(raw, &o) != nil || o.PID <= 0 {
		return o, false
	}
	return o, syscall.Kill(o.PID, 0) == nil
}
