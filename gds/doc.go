// Package gds owns the GPU interface of a mount: the capabilities that
// /.shardfs/ctl returns, the ioctl ABI spoken on the ctl file and on shard
// file descriptors (register a /dev/shm buffer, READ shard bytes into it,
// LEASE cache extents for cuFile/GPUDirect Storage readers, SUBMIT many
// READs at once and WAIT for their completions, WHOLE_FILE: where the cache
// holds a shard as one file that such a reader opens itself), and GPU
// discovery through NVML.
//
// The FUSE layer routes ioctls here as raw payloads; this package decodes
// them, checks every field, and answers with a result and an errno. It keeps
// per-handle state (registered buffers, leases, batch completions) that
// dies with the handle. Batch entries are served by a pool of workers the
// Server owns (workers.go), RAM-resident entries first (batch.go), within
// bounds per handle, uid and mount.
//
// This package never mounts anything, never fetches from a store directly
// (reads go through the mount's read path, Files) and never links against
// CUDA: NVML is loaded at run time, and a machine without a driver simply
// reports no GPUs.
package gds
