package tarindex

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/shardfs/shardfs/store"
)

// Sidecar indexes: the text index DALI's wds2idx writes beside a shard.
//
//	v1.2 SAMPLES
//	EXT DATA_OFFSET SIZE NAME [EXT DATA_OFFSET SIZE NAME ...]
//	...
//
// One line per sample, four space-separated fields per member, members in
// archive order. Version v1.1 has no NAME field and cannot name members:
// it is not used. wds2idx names the file after the shard up to the first
// dot of its base name (shard-000.tar: shard-000.idx); SHARD.idx is looked
// for as well.
//
// A sidecar is believed after a check that costs a few small reads, never
// a scan: its members lie in archive order, block-aligned, within the
// shard; the headers before its first member, between any two members
// that are not back to back, and of its last member are read and must
// name that member with that size and no other regular file; and the
// shard ends after its last member. What the check cannot see is a wrong
// name in a header it skips.

const (
	sidecarMax      = 64 << 20 // bytes of sidecar read at most
	sidecarVersion  = "v1.2"
	sidecarMaxReads = 16 // header gaps read to check a sidecar: past it a scan costs no more
	block           = 512
	// maxHeaders bounds the headers of one member: archive/tar reads PAX
	// and GNU long-name records of at most 1 MiB.
	maxHeaders = 1<<20 + 4*block
)

// errSidecarUnchecked is a sidecar that may well be right but would cost
// as much to check as a scan: no warning.
var errSidecarUnchecked = errors.New("sidecar not checked")

// SidecarKeys returns where a sidecar index of the shard at key may lie,
// the most likely first.
func SidecarKeys(key string) []string {
	dir, base := path.Split(key)
	keys := []string{}
	if i := strings.IndexByte(base[min(1, len(base)):], '.'); i >= 0 {
		keys = append(keys, dir+base[:i+min(1, len(base))]+".idx")
	}
	return append(keys, key+".idx")
}

// parseSidecar reads a v1.2 sidecar into members in archive order.
func parseSidecar(data []byte) ([]Member, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), len(data)+1)
	if !sc.Scan() {
		return nil, errors.New("empty")
	}
	head := strings.Fields(sc.Text())
	if len(head) != 2 || !strings.HasPrefix(head[0], "v") {
		return nil, fmt.Errorf("first line %q is not VERSION SAMPLES", sc.Text())
	}
	if head[0] != sidecarVersion {
		return nil, fmt.Errorf("version %s (only %s names its members)", head[0], sidecarVersion)
	}
	samples, err := strconv.Atoi(head[1])
	if err != nil || samples < 0 {
		return nil, fmt.Errorf("sample count %q", head[1])
	}
	var members []Member
	lines := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		lines++
		if len(f)%4 != 0 {
			return nil, fmt.Errorf("line %d: %d fields, not EXT OFFSET SIZE NAME groups", lines+1, len(f))
		}
		for i := 0; i < len(f); i += 4 {
			off, err1 := strconv.ParseInt(f[i+1], 10, 64)
			size, err2 := strconv.ParseInt(f[i+2], 10, 64)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("line %d: offset %q, size %q", lines+1, f[i+1], f[i+2])
			}
			members = append(members, Member{Name: f[i+3], Offset: off, Size: size})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if lines != samples {
		return nil, fmt.Errorf("%d sample lines, the first line says %d", lines, samples)
	}
	return members, nil
}

// padded is where the next header lies after m's data.
func padded(m Member) int64 { return m.Offset + (m.Size+block-1)/block*block }

// checkSidecar checks members, read from a sidecar, against the shard obj
// through f.
func checkSidecar(ctx context.Context, f Fetcher, obj store.Object, members []Member) error {
	if len(members) == 0 {
		return errors.New("no members")
	}
	prevEnd := int64(0)
	var gaps []int // members whose headers are read
	for i, m := range members {
		switch {
		case m.Offset%block != 0 || m.Size < 0 || m.Offset+m.Size > obj.Size:
			return fmt.Errorf("member %s at %d, %d bytes: not a member of a %d-byte tar", m.Name, m.Offset, m.Size, obj.Size)
		case m.Offset < prevEnd+block:
			return fmt.Errorf("member %s at %d: overlaps the one before or its header", m.Name, m.Offset)
		case i == 0 || i == len(members)-1 || m.Offset > prevEnd+block:
			gaps = append(gaps, i)
		}
		prevEnd = padded(m)
	}
	if len(gaps) > sidecarMaxReads {
		return fmt.Errorf("%w: %d members behind more than one header", errSidecarUnchecked, len(gaps))
	}
	for _, i := range gaps {
		from := int64(0)
		if i > 0 {
			from = padded(members[i-1])
		}
		if err := checkHeaders(ctx, f, obj, from, members[i]); err != nil {
			return err
		}
	}
	return checkEnd(ctx, f, obj, prevEnd)
}

// checkHeaders reads the headers between from and m's data: they must end
// with m's and hold no other regular file.
func checkHeaders(ctx context.Context, f Fetcher, obj store.Object, from int64, m Member) error {
	if m.Offset-from > maxHeaders {
		return fmt.Errorf("%d bytes before member %s: more than headers", m.Offset-from, m.Name)
	}
	gap := make([]byte, m.Offset-from)
	if _, err := f.ReadRange(ctx, obj, from, gap); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: reading headers at %d: %w", errSidecarUnchecked, from, err)
	}
	r := bytes.NewReader(gap)
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err != nil {
			return fmt.Errorf("headers at %d before member %s: %v", from, m.Name, err)
		}
		if !isContiguousFile(h) {
			continue
		}
		if h.Name != m.Name || h.Size != m.Size || r.Len() != 0 {
			return fmt.Errorf("the shard has %s (%d bytes, data at %d), the sidecar %s (%d bytes at %d)",
				h.Name, h.Size, m.Offset-int64(r.Len()), m.Name, m.Size, m.Offset)
		}
		return nil
	}
}

// checkEnd checks that the shard holds no header after end: it ends there
// or with a zero block, as tar archives end.
func checkEnd(ctx context.Context, f Fetcher, obj store.Object, end int64) error {
	if end >= obj.Size {
		return nil
	}
	blk := make([]byte, block)
	n, err := f.ReadRange(ctx, obj, end, blk)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: reading the end at %d: %w", errSidecarUnchecked, end, err)
	}
	if !bytes.Equal(blk[:n], make([]byte, n)) {
		return fmt.Errorf("the shard goes on after the sidecar's last member, at byte %d", end)
	}
	return nil
}
