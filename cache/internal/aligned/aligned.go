// Package aligned makes and recognizes buffers that O_DIRECT I/O can use:
// address and length multiples of Size. The ring (package cache) and the
// whole-shard files (package wholefile) both write and read that way.
package aligned

import "unsafe"

// Size is the alignment O_DIRECT needs on the filesystems the cache runs
// on: the page size, a multiple of every logical block size in use.
const Size = 4096

// Buffer returns n zeroed bytes whose address is a multiple of Size.
func Buffer(n int) []byte {
	raw := make([]byte, n+Size)
	skip := Size - int(uintptr(unsafe.Pointer(&raw[0]))%Size)
	if skip == Size {
		skip = 0
	}
	return raw[skip : skip+n : skip+n]
}

// Is reports whether p's address and length are multiples of Size.
func Is(p []byte) bool {
	return len(p) > 0 && len(p)%Size == 0 && uintptr(unsafe.Pointer(&p[0]))%Size == 0
}

// Up rounds n up to a multiple of Size: the length of an O_DIRECT write
// of n bytes padded with zeros.
func Up(n int64) int64 { return (n + Size - 1) / Size * Size }
