// Package atomicfile owns replacing a file whole or not at all: the bytes
// go to a new private file beside the target (created with O_EXCL, so a
// link planted there is never written through), which is synced and then
// renamed over the target. A reader, or a process killed at any point,
// finds the old file or the new one, never a mix, and never an empty file
// after a power loss. github.com/google/renameio/v2 does the sequence.
//
// The caller says at each call what the result must survive (Durability):
// Durable also syncs the directory after the rename, so the new file is
// there after a power loss once the call returns; Atomic leaves that to
// the kernel, for files that are rebuilt or rewritten when missing.
//
// A process killed mid-write leaves its temporary file behind: IsTemp
// names such files, so the owner of a directory can remove them.
//
// This package never decides what a file holds, where it lives or when
// it is written.
package atomicfile
