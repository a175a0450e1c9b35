//go:build e2e

package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shardfs/shardfs/gds"
)

// The hostile suite runs its clients as separate processes (this test
// binary again, with hostileEnv set), so they can run as another user
// (setpriv) and so a fault they provoke is the daemon's, never the test's.
// Each action prints one JSON object of what it saw.
const hostileEnv = "SHARDFS_HOSTILE_ACTION"

func init() {
	if action := os.Getenv(hostileEnv); action != "" {
		out, err := runHostileAction(action, os.Args[1:])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		json.NewEncoder(os.Stdout).Encode(out)
		os.Exit(0)
	}
}

func runHostileAction(action string, args []string) (map[string]any, error) {
	mnt := args[0]
	switch action {
	case "hints-flood":
		return hintsFlood(mnt)
	case "hints-unknown":
		return hintsUnknown(mnt)
	case "probe":
		return probe(mnt, args[1:])
	case "lease-flood":
		n, _ := strconv.Atoi(args[2])
		return leaseFlood(mnt, args[1], n)
	case "truncate-during-reads":
		return truncateDuringReads(mnt, args[1])
	case "whole-file":
		return wholeFile(mnt, args[1])
	case "hold":
		return hold(mnt, args[1])
	}
	return nil, fmt.Errorf("unknown action %q", action)
}

func errnoName(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	if err == nil {
		return "OK"
	}
	return err.Error()
}

// hintsFlood writes 300 MiB without a newline, as head -c 300M /dev/zero.
func hintsFlood(mnt string) (map[string]any, error) {
	f, err := os.OpenFile(filepath.Join(mnt, ".shardfs", "hints"), os.O_WRONLY, 0)
	if err != nil {
		return map[string]any{"open": errnoName(err)}, nil
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	start := time.Now()
	written := 0
	for written < 300<<20 {
		n, err := f.Write(chunk)
		written += n
		if err != nil {
			return map[string]any{"open": "OK", "write": errnoName(err), "written": written, "seconds": time.Since(start).Seconds()}, nil
		}
	}
	return map[string]any{"open": "OK", "write": "OK", "written": written, "seconds": time.Since(start).Seconds()}, nil
}

// hintsUnknown writes 200,000 lines naming no file, and some oversized
// and malformed ones.
func hintsUnknown(mnt string) (map[string]any, error) {
	f, err := os.OpenFile(filepath.Join(mnt, ".shardfs", "hints"), os.O_WRONLY, 0)
	if err != nil {
		return map[string]any{"open": errnoName(err)}, nil
	}
	defer f.Close()
	var buf bytes.Buffer
	failed := 0
	for i := range 200_000 {
		fmt.Fprintf(&buf, "no/such/shard-%06d.tar\n", i)
		if buf.Len() > 100<<10 {
			if _, err := f.Write(buf.Bytes()); err != nil {
				failed++
			}
			buf.Reset()
		}
	}
	f.Write(buf.Bytes())
	malformed := map[string]string{}
	for name, line := range map[string][]byte{
		"long line": append(bytes.Repeat([]byte("a/"), 40<<10), '\n'),
		"nul bytes": []byte("\x00\x00\x00\n../../etc/passwd\n/\n\n\n"),
		"binary":    bytes.Repeat([]byte{0xff, 0xfe, '\n'}, 10_000),
	} {
		_, err := f.Write(line)
		malformed[name] = errnoName(err)
	}
	return map[string]any{"open": "OK", "failed_writes": failed, "malformed": malformed}, nil
}

func ioctl(fd int, cmd uint32, buf []byte) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(cmd), uintptr(unsafe.Pointer(&buf[0])))
	if e != 0 {
		return e
	}
	return nil
}

type encoder interface{ Encode() ([]byte, error) }

func call(fd int, cmd uint32, req encoder) ([]byte, error) {
	buf, err := req.Encode()
	if err != nil {
		return nil, err
	}
	return buf, ioctl(fd, cmd, buf)
}

// ownShm creates a 0600 shm file of this process's uid.
func ownShm(size int64, sparse bool) (string, *os.File, error) {
	f, err := os.CreateTemp("/dev/shm", "shardfs-hostile-*")
	if err != nil {
		return "", nil, err
	}
	if sparse {
		err = f.Truncate(size)
	} else {
		err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	}
	if err != nil {
		return "", nil, err
	}
	return filepath.Base(f.Name()), f, nil
}

// probe tries each door of the GPU side interface: stats, ctl, REGISTER of
// someone else's buffer (args[0]) and of its own, a READ, a LEASE of
// args[1] and reading the ring file the lease names.
func probe(mnt string, args []string) (map[string]any, error) {
	out := map[string]any{}
	_, err := os.ReadFile(filepath.Join(mnt, ".shardfs", "stats"))
	out["stats"] = errnoName(err)
	_, err = os.Stat(filepath.Join(mnt, args[1]))
	out["stat_shard"] = errnoName(err)
	ctl, err := os.Open(filepath.Join(mnt, ".shardfs", "ctl"))
	out["ctl"] = errnoName(err)
	if err != nil {
		return out, nil
	}
	defer ctl.Close()
	fd := int(ctl.Fd())
	_, err = call(fd, gds.CmdRegister, gds.RegisterReq{Name: args[0], Size: 4096})
	out["register_foreign"] = errnoName(err)
	name, f, err := ownShm(1<<20, false)
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	reply, err := call(fd, gds.CmdRegister, gds.RegisterReq{Name: name, Size: 1 << 20})
	out["register_own"] = errnoName(err)
	if err == nil {
		r, _ := gds.DecodeRegister(reply)
		_, err = call(fd, gds.CmdRead, gds.ReadReq{Path: args[1], Length: 1 << 20, BufID: r.BufID})
		out["read"] = errnoName(err)
	}
	reply, err = call(fd, gds.CmdLease, gds.LeaseReq{Path: args[1], Length: 1 << 20})
	out["lease"] = errnoName(err)
	if err == nil {
		r, _ := gds.DecodeLeaseReply(reply)
		_, err := os.ReadFile(r.Paths[0])
		out["read_leased_ring"] = errnoName(err)
		out["ring_dir"] = filepath.Dir(r.Paths[0])
		_, err = os.ReadDir(filepath.Dir(r.Paths[0]))
		out["list_cache_dir"] = errnoName(err)
	}
	return out, nil
}

// leaseFlood opens the ctl file n times and leases shard on each until
// refused; the fds close when the process exits.
func leaseFlood(mnt, shard string, n int) (map[string]any, error) {
	counts := map[string]int{}
	var fds []*os.File
	for i := range n {
		ctl, err := os.Open(filepath.Join(mnt, ".shardfs", "ctl"))
		if err != nil {
			counts["open "+errnoName(err)]++
			continue
		}
		fds = append(fds, ctl)
		for j := range 64 {
			_, err := call(int(ctl.Fd()), gds.CmdLease, gds.LeaseReq{Path: shard, FileOffset: uint64((i + j) % 4 << 20), Length: 1 << 20})
			counts[errnoName(err)]++
			if err != nil {
				break
			}
		}
		// Lengths past int64, which once went negative.
		_, err = call(int(ctl.Fd()), gds.CmdLease, gds.LeaseReq{Path: shard, Length: 1<<64 - 1})
		counts["huge "+errnoName(err)]++
	}
	for _, f := range fds {
		f.Close()
	}
	return map[string]any{"results": counts}, nil
}

// truncateDuringReads registers a 64 MiB sparse buffer and READs shard
// into it from 4 threads while another truncates and re-extends the file;
// then READs once more into a whole buffer and compares with pread through
// the mount.
func truncateDuringReads(mnt, shard string) (map[string]any, error) {
	const size = 64 << 20
	ctl, err := os.Open(filepath.Join(mnt, ".shardfs", "ctl"))
	if err != nil {
		return map[string]any{"ctl": errnoName(err)}, nil
	}
	defer ctl.Close()
	fd := int(ctl.Fd())
	name, f, err := ownShm(size, true)
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	reply, err := call(fd, gds.CmdRegister, gds.RegisterReq{Name: name, Size: size})
	if err != nil {
		return map[string]any{"register": errnoName(err)}, nil
	}
	r, _ := gds.DecodeRegister(reply)
	fi, err := os.Stat(filepath.Join(mnt, shard))
	if err != nil {
		return nil, err
	}
	n := min(fi.Size(), 16<<20)
	var mu sync.Mutex
	results := map[string]int{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_, err := call(fd, gds.CmdRead, gds.ReadReq{Path: shard, Length: uint64(n), BufID: r.BufID, BufOffset: uint64(w) * (16 << 20)})
				mu.Lock()
				results[errnoName(err)]++
				mu.Unlock()
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		f.Truncate(0)
		time.Sleep(time.Millisecond)
		unix.Fallocate(int(f.Fd()), 0, 0, size)
		time.Sleep(2 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	// The file is whole again: a READ must now bring the shard's bytes.
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		return nil, err
	}
	_, err = call(fd, gds.CmdRead, gds.ReadReq{Path: shard, Length: uint64(n), BufID: r.BufID})
	final := errnoName(err)
	got := make([]byte, n)
	f.ReadAt(got, 0)
	want := make([]byte, n)
	sf, err := os.Open(filepath.Join(mnt, shard))
	if err != nil {
		return nil, err
	}
	defer sf.Close()
	sf.ReadAt(want, 0)
	return map[string]any{"results": results, "final": final, "final_right": bytes.Equal(got, want)}, nil
}

// hold keeps the mount busy as a client that never lets go would: shard
// open and half read, a ctl handle with a registered buffer and a lease,
// and a READ into that buffer running in a loop. It prints one line once
// all of that is held and keeps it until its stdin closes.
func hold(mnt, shard string) (map[string]any, error) {
	sf, err := os.Open(filepath.Join(mnt, shard))
	if err != nil {
		return nil, err
	}
	defer sf.Close()
	fi, err := sf.Stat()
	if err != nil {
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, sf, fi.Size()/2); err != nil {
		return nil, err
	}
	ctl, err := os.Open(filepath.Join(mnt, ".shardfs", "ctl"))
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	fd := int(ctl.Fd())
	name, buf, err := ownShm(4<<20, false)
	if err != nil {
		return nil, err
	}
	defer os.Remove(buf.Name())
	reply, err := call(fd, gds.CmdRegister, gds.RegisterReq{Name: name, Size: 4 << 20})
	if err != nil {
		return nil, fmt.Errorf("REGISTER: %w", err)
	}
	r, _ := gds.DecodeRegister(reply)
	if _, err := call(fd, gds.CmdLease, gds.LeaseReq{Path: shard, Length: 1 << 20}); err != nil {
		return nil, fmt.Errorf("LEASE: %w", err)
	}
	reads := map[string]int{}
	var mu sync.Mutex
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			_, err := call(fd, gds.CmdRead, gds.ReadReq{Path: shard, Length: 4 << 20, BufID: r.BufID})
			mu.Lock()
			reads[errnoName(err)]++
			mu.Unlock()
			if err != nil {
				return // the mount is gone
			}
		}
	}()
	fmt.Println(`{"holding":true}`)
	io.Copy(io.Discard, os.Stdin)
	stop.Store(true)
	wg.Wait()
	return map[string]any{"reads": reads}, nil
}

// wholeFile asks WHOLE_FILE for shard on the ctl file and on the shard's
// own fd, opens any file named, and reads the shard through the mount.
func wholeFile(mnt, shard string) (map[string]any, error) {
	out := map[string]any{}
	ask := func(door string, f *os.File, path string) {
		reply, err := call(int(f.Fd()), gds.CmdWholeFile, gds.WholeFileReq{Path: path})
		out[door] = errnoName(err)
		if err == nil {
			r, _ := gds.DecodeWholeFile(reply)
			out[door+"_file"] = r.File
			_, err := os.ReadFile(r.File)
			out[door+"_open"] = errnoName(err)
		}
	}
	ctl, err := os.Open(filepath.Join(mnt, ".shardfs", "ctl"))
	if err != nil {
		return map[string]any{"ctl_open": errnoName(err)}, nil
	}
	defer ctl.Close()
	ask("ctl", ctl, shard)
	sf, err := os.Open(filepath.Join(mnt, shard))
	if err != nil {
		return map[string]any{"shard_open": errnoName(err)}, nil
	}
	defer sf.Close()
	ask("fd", sf, "")
	_, err = io.ReadAll(sf)
	out["read_mount"] = errnoName(err)
	return out, nil
}
