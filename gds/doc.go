// Package gds owns the GPU interface of a mount: the capabilities that
// /.shardfs/ctl returns, the ioctl ABI spoken on the ctl file and on shard
// file descriptors (register a /dev/shm buffer, READ shard bytes into it,
// LEASE cache extents for cuFile/GPUDirect Storage readers), and GPU
// discovery through NVML.
//
// The FUSE layer routes ioctls here as raw payloads; this package decodes
// them, checks every field, and answers with a result and an errno. It keeps
// per-handle state (registered buffers, leases) that dies with the handle.
//
// This package never mounts anything, never fetches from a store directly
// (reads go through the mount's read path, Files) and never links against
// CUDA: NVML is loaded at run time, and a machine without a driver simply
// reports no GPUs.
package gds
