package gds

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

func TestCommandNumbersAreLinuxIoctls(t *testing.T) {
	// Values as C's _IOWR(0xBD, 1, struct of 280 bytes) etc. compute them;
	// the Python client hard-codes the same numbers.
	want := map[string][2]uint32{
		"register":   {CmdRegister, 0xC118BD01},
		"unregister": {CmdUnregister, 0x4010BD02},
		"read":       {CmdRead, 0xC430BD03},
		"lease":      {CmdLease, 0xDC30BD04},
		"lease_drop": {CmdLeaseDrop, 0x4010BD05},
	}
	for name, c := range want {
		if c[0] != c[1] {
			t.Errorf("%s = %#x, want %#x", name, c[0], c[1])
		}
		if size := c[0] >> 16 & 0x3fff; size > maxIoctlSize || size == 0 {
			t.Errorf("%s size %d does not fit a restricted ioctl", name, size)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	reg := RegisterReq{Size: 1 << 30, BufID: 7, Name: "shardfs-buf-1"}
	p, err := reg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeRegister(p); err != nil || got != reg {
		t.Errorf("register: %+v, %v", got, err)
	}

	rd := ReadReq{FileOffset: 1<<40 + 3, Length: 8 << 20, BufID: 9, BufOffset: 4096, BytesRead: 5, Path: "train/shard-000.tar"}
	p, _ = rd.Encode()
	if got, err := DecodeRead(p); err != nil || got != rd {
		t.Errorf("read: %+v, %v", got, err)
	}

	ls := LeaseReq{FileOffset: 10, Length: 20, Path: "a.tar", LeaseID: 3, Covered: 20,
		Extents: []LeaseExtent{{PathIndex: 0, CacheOffset: 4096, Length: 5, FileOffset: 10}, {PathIndex: 1, CacheOffset: 0, Length: 15, FileOffset: 15}},
		Paths:   []string{"/cache/ring.0", "/cache/ring.1"}}
	p, err = ls.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeLeaseReply(p); err != nil || !reflect.DeepEqual(got, ls) {
		t.Errorf("lease reply: %+v, %v", got, err)
	}
	if got, err := DecodeLease(p); err != nil || got.Extents != nil || got.LeaseID != 0 || got.Path != "a.tar" {
		t.Errorf("lease request ignores reply fields: %+v, %v", got, err)
	}

	for _, enc := range []interface{ Encode() ([]byte, error) }{UnregisterReq{BufID: 4}, LeaseDropReq{LeaseID: 5}} {
		p, _ := enc.Encode()
		if len(p) != unregisterSize || le.Uint64(p[8:]) == 0 {
			t.Errorf("%T encoded as %x", enc, p)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := ReadReq{Path: "x"}.Encode()
	mutate := func(f func(p []byte)) []byte {
		p := append([]byte(nil), good...)
		f(p)
		return p
	}
	cases := map[string]struct {
		p    []byte
		want error
	}{
		"short":                     {good[:readSize-1], ErrShortPayload},
		"version 0":                 {mutate(func(p []byte) { le.PutUint32(p, 0) }), ErrABIVersion},
		"version 1 (older clients)": {mutate(func(p []byte) { le.PutUint32(p, 1) }), nil},
		"version 2":                 {mutate(func(p []byte) { le.PutUint32(p, 2) }), nil},
		"version 3":                 {mutate(func(p []byte) { le.PutUint32(p, 3) }), nil},
		"version 4":                 {mutate(func(p []byte) { le.PutUint32(p, 4) }), ErrABIVersion},
		"flags":                     {mutate(func(p []byte) { p[4] = 1 }), ErrBadField},
		"no terminator":             {mutate(func(p []byte) { fill(p[48:], 'a') }), ErrBadField},
		"after terminator":          {mutate(func(p []byte) { p[readSize-1] = 'z' }), ErrBadField},
	}
	for name, c := range cases {
		if _, err := DecodeRead(c.p); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if _, err := (RegisterReq{Name: string(make([]byte, ShmNameSize))}).Encode(); !errors.Is(err, ErrBadField) {
		t.Errorf("oversized name encoded: %v", err)
	}
	bad, _ := LeaseReq{Path: "a"}.Encode()
	le.PutUint32(bad[40:], MaxLeaseExtents+1)
	if _, err := DecodeLeaseReply(bad); !errors.Is(err, ErrBadField) {
		t.Errorf("lease reply with too many extents: %v", err)
	}
	le.PutUint32(bad[40:], 1) // one extent naming path 0 of 0
	if _, err := DecodeLeaseReply(bad); !errors.Is(err, ErrBadField) {
		t.Errorf("lease extent without path: %v", err)
	}
}

func fill(p []byte, b byte) {
	for i := range p {
		p[i] = b
	}
}

// FuzzDecode feeds arbitrary payloads to every decoder: none may panic,
// and whatever one accepts must encode back to a payload that decodes to
// the same request.
func FuzzDecode(f *testing.F) {
	for _, r := range []interface{ Encode() ([]byte, error) }{
		RegisterReq{Size: 4096, Name: "buf"},
		UnregisterReq{BufID: 1},
		ReadReq{FileOffset: 1, Length: 2, BufID: 3, BufOffset: 4, Path: "dir/shard.tar"},
		LeaseReq{FileOffset: 0, Length: 1 << 20, Path: "s.tar", Covered: 1, Extents: []LeaseExtent{{Length: 1}}, Paths: []string{"/c/ring"}},
		LeaseDropReq{LeaseID: 2},
		WholeFileReq{Path: "s.tar", Size: 7, File: "/c/shards/ab"},
	} {
		p, err := r.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		roundTrip(t, p, DecodeRegister, RegisterReq.Encode)
		roundTrip(t, p, DecodeUnregister, UnregisterReq.Encode)
		roundTrip(t, p, DecodeRead, ReadReq.Encode)
		roundTrip(t, p, DecodeLease, LeaseReq.Encode)
		roundTrip(t, p, DecodeLeaseReply, LeaseReq.Encode)
		roundTrip(t, p, DecodeLeaseDrop, LeaseDropReq.Encode)
		roundTrip(t, p, DecodeWholeFile, WholeFileReq.Encode)
	})
}

func roundTrip[R any](t *testing.T, p []byte, decode func([]byte) (R, error), encode func(R) ([]byte, error)) {
	r, err := decode(p)
	if err != nil {
		return
	}
	q, err := encode(r)
	if err != nil {
		t.Fatalf("%T decoded from %x does not encode: %v", r, p, err)
	}
	r2, err := decode(q)
	if err != nil || !reflect.DeepEqual(r, r2) {
		t.Fatalf("%T round trip: %+v -> %+v, %v", r, r, r2, err)
	}
}

// TestWireStructsHaveNoPadding: the sizes the command numbers carry are
// unsafe.Sizeof of the wire structs; they are the wire sizes only if Go
// adds no padding, which encoding/binary's own count tells.
func TestWireStructsHaveNoPadding(t *testing.T) {
	for name, c := range map[string]struct {
		v    any
		size int
	}{
		"register": {registerWire{}, registerSize}, "unregister": {unregisterWire{}, unregisterSize},
		"read": {readWire{}, readSize}, "extent": {extentWire{}, leaseExtentLen},
		"lease": {leaseWire{}, leaseSize}, "lease_drop": {leaseDropWire{}, leaseDropSize},
	} {
		if got := binary.Size(c.v); got != c.size {
			t.Errorf("%s: encoding/binary counts %d bytes, the command number says %d", name, got, c.size)
		}
	}
}
