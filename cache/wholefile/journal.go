package wholefile

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/atomicfile"
)

// The journal vouches for whole-shard files. A file is used only when the
// journal holds a record naming it with its size: the record is appended
// and synced after the file's bytes are, and before the file is renamed
// to its name, so a file torn by a crash never has its name and a record.
//
// Each record is framed as
//
//	[payload length uint32][CRC32C of payload uint32][payload: JSON record]
//
// little endian. A record torn by a crash fails its CRC (or is short) and
// ends the journal there: what follows it is ignored. A record of size 0
// is a tombstone: the name's file was dropped, and earlier records of the
// name no longer vouch for it.
const (
	// DirName is the files' directory in a cache dir.
	DirName = "shards"
	// JournalName is the journal's name in DirName.
	JournalName      = "journal"
	tmpSuffix        = ".tmp" // what earlier releases wrote before a rename
	recordFrame      = 8
	maxRecordPayload = 64 << 10
)

// record describes one complete whole-shard file.
type record struct {
	Name string `json:"name"` // the file's name: hex of the version id
	Key  string `json:"key"`
	ETag string `json:"etag"`
	Size int64  `json:"size"`
	Sum  uint32 `json:"crc32c"` // over the whole file
}

// Name is the file name of the version id.
func Name(id [16]byte) string { return hex.EncodeToString(id[:]) }

// isName reports whether name is a whole-shard file's name.
func isName(name string) bool {
	b, err := hex.DecodeString(name)
	return err == nil && len(b) == len([16]byte{})
}

func wholeDir(cacheDir string) string { return filepath.Join(cacheDir, DirName) }

func encodeRecord(r record) ([]byte, error) {
	payload, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if len(payload) > maxRecordPayload {
		return nil, fmt.Errorf("whole-shard record of %d bytes: key too long", len(payload))
	}
	out := make([]byte, recordFrame, recordFrame+len(payload))
	binary.LittleEndian.PutUint32(out, uint32(len(payload)))
	binary.LittleEndian.PutUint32(out[4:], checksum(payload))
	return append(out, payload...), nil
}

// readJournal returns the records of the journal at path, the last record
// of each name winning. A missing journal holds none.
func readJournal(path string) (map[string]record, error) {
	recs := map[string]record{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return recs, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read whole-shard journal: %w", err)
	}
	for len(b) >= recordFrame {
		n := int(binary.LittleEndian.Uint32(b))
		sum := binary.LittleEndian.Uint32(b[4:])
		if n > maxRecordPayload || len(b) < recordFrame+n || checksum(b[recordFrame:recordFrame+n]) != sum {
			break // torn tail
		}
		var r record
		dec := json.NewDecoder(bytes.NewReader(b[recordFrame : recordFrame+n]))
		dec.DisallowUnknownFields()
		if dec.Decode(&r) == nil && isName(r.Name) {
			switch {
			case r.Size > 0:
				recs[r.Name] = r
			case r.Size == 0:
				delete(recs, r.Name)
			}
		}
		b = b[recordFrame+n:]
	}
	return recs, nil
}

// writeJournal replaces the journal at path with recs, durably: the
// records vouch for files kept through a power loss.
func writeJournal(path string, recs map[string]record) error {
	err := atomicfile.Write(path, atomicfile.Durable, func(w io.Writer) error {
		for _, r := range recs {
			b, err := encodeRecord(r)
			if err != nil {
				return err
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write whole-shard journal: %w", err)
	}
	return nil
}

// appendRecord adds r to the open journal and, with sync, syncs it.
func appendRecord(j *os.File, r record, sync bool) error {
	b, err := encodeRecord(r)
	if err != nil {
		return err
	}
	if _, err := j.Write(b); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	return j.Sync()
}

// checkFiles makes a shards dir hold only files the journal vouches
// for: leftovers of an interrupted write (*.tmp) and files without a
// record, or of another size than their record says, are deleted. It
// returns the records of the files kept and their last use (mtime).
func checkFiles(dir string, recs map[string]record) (kept map[string]record, lastUse map[string]int64, dropped int, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read %s: %w", dir, err)
	}
	kept, lastUse = map[string]record{}, map[string]int64{}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		switch {
		case strings.HasSuffix(name, tmpSuffix) || atomicfile.IsTemp(name):
			os.Remove(path)
			continue
		case !isName(name):
			continue // the journal, or not ours
		}
		var st unix.Stat_t
		r, ok := recs[name]
		if ok && unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == r.Size && st.Nlink == 1 {
			kept[name], lastUse[name] = r, st.Mtim.Nano()
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, dropped, fmt.Errorf("drop unvouched whole-shard file: %w", err)
		}
		dropped++
	}
	return kept, lastUse, dropped, nil
}

// wholeCheckChunk is how much of a file checkWhole reads at a time.
const wholeCheckChunk = 1 << 20

// checkWhole reads the whole-shard file f from its start (pread: f's
// offset is left alone) and says how it differs from its record r: "" when
// it holds r.Size bytes whose CRC32C is r.Sum. The one check of a file's
// bytes: cache verify makes it, and so does an open before it hands a
// file out (Tier.OpenFile).
func checkWhole(f *os.File, r record) string {
	fi, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	if fi.Size() != r.Size {
		return fmt.Sprintf("%d bytes, its record says %d", fi.Size(), r.Size)
	}
	h := newSum()
	n, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, r.Size), make([]byte, min(wholeCheckChunk, max(r.Size, 1))))
	switch {
	case err != nil:
		return err.Error()
	case n != r.Size:
		return fmt.Sprintf("%d bytes, its record says %d", n, r.Size)
	case h.Sum32() != r.Sum:
		return fmt.Sprintf("CRC32C %08x, its record says %08x", h.Sum32(), r.Sum)
	}
	return ""
}
