"""Python side of shardfs, a read-only FUSE mount of training shards.

Public names (stable; each also importable from its module):

    TarShards         shardfs.iterable  WebDataset-style IterableDataset: shards split
                                        across ranks and DataLoader workers, streamed
    TarIndexDataset   shardfs.mapstyle  map-style Dataset: tar headers indexed once,
                                        samples read with os.pread
    ScheduledSampler  shardfs.mapstyle  wraps its sampler and writes the epoch's sample
                                        schedule (byte ranges, in order) to the mount
    build_index, index_shard, find_shards, split_key, decode_member
                                        the pieces both datasets are made of
    Hints, write_hints shardfs.hints    tell a mount which shards are read next
    find_mount, side_files, SideFiles, read_stats, capabilities
                      shardfs.mount     the mount holding a path and its /.shardfs files
    Client            shardfs.gpu       the GPU side interface: read_into(dst, path,
                                        offset, length) into numpy arrays, pinned or
                                        CUDA torch tensors (needs numpy)
    GPUPrefetcher     shardfs.gpu       batches read into CUDA tensors a step ahead

Only the standard library is required. torch is used when installed (the
datasets are then torch Datasets; without it they are plain iterables and
sequences); numpy is needed by shardfs.gpu alone (its ABI names excepted). The datasets and the GPU
client are imported on first use, so `import shardfs` is cheap.
"""

from ._lazy import lazy
from .hints import Hints, write_hints
from .mount import SideFiles, capabilities, find_mount, read_stats, side_files

__version__ = "0.1.0"

_LAZY = {
    "TarShards": "iterable",
    "find_shards": "iterable",
    "split_key": "iterable",
    "decode_member": "iterable",
    "TarIndexDataset": "mapstyle",
    "ScheduledSampler": "mapstyle",
    "build_index": "mapstyle",
    "index_shard": "mapstyle",
    "Client": "gpu",
    "GPUPrefetcher": "gpu",
}

__all__ = ["Hints", "write_hints", "SideFiles", "capabilities", "find_mount", "read_stats", "side_files",
           *_LAZY]


__getattr__, __dir__ = lazy(globals(), _LAZY)
