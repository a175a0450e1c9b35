"""A map-style Dataset over .tar shards: index once, then os.pread each sample.

Building the index reads only the tar headers (tarfile seeks over the member
data; on a shardfs mount the mount's own index of each shard, /.shardfs/index/PATH,
is read instead, built from the headers with small ranged reads), and records for every sample the shard and the (offset, size) of each
of its members. dataset[i] then costs one pread per member and works with any
sampler: shuffling, DistributedSampler for ranks, a plain DataLoader. On a
shardfs mount a random pread fetches only the cache blocks it touches.

    from torch.utils.data import DataLoader
    from shardfs import TarIndexDataset
    ds = TarIndexDataset("/mnt/wds", index_path="/tmp/wds.index.json")
    loader = DataLoader(ds, batch_size=None, shuffle=True, num_workers=4)

The index can be saved (index_path) so later runs and other ranks skip the
header scan. File descriptors are opened lazily in each worker process.
"""

import json
import os
import tarfile
from concurrent.futures import ThreadPoolExecutor

from .iterable import decode_member, find_shards, split_key
from .mount import SIDE_DIR, find_mount

try:
    from torch.utils.data import Dataset
except ImportError:  # torch is optional: without it the dataset is a plain sequence
    Dataset = object


def served_members(path):
    """[(name, offset, size)] of the regular members of the shard at path, from the
    index its shardfs mount serves (/.shardfs/index/PATH), or None off a mount."""
    mount = find_mount(path)
    if mount is None:
        return None
    rel = os.path.relpath(os.path.abspath(path), mount.root)
    try:
        with open(os.path.join(mount.root, SIDE_DIR, "index", rel), "rb") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:  # a mount without the index
        return None
    return [(m["name"], m["offset"], m["size"]) for m in map(json.loads, lines)]


def tar_members(path):
    """[(name, offset, size)] of the regular members of the shard at path, read with tarfile."""
    with tarfile.open(path, mode="r:") as tar:
        return [(m.name, m.offset_data, m.size) for m in tar if m.isfile()]


def index_shard(path):
    """Returns [(key, {ext: (offset, size)})] for the samples of one shard, in order."""
    members = served_members(path)
    if members is None:
        members = tar_members(path)
    samples = []
    for name, offset, size in members:
        key, ext = split_key(name)
        if not samples or samples[-1][0] != key:
            samples.append((key, {}))
        samples[-1][1][ext] = (offset, size)
    return samples


def build_index(root, workers=8):
    """Indexes every .tar under root: {"root", "shards": [relpath], "samples": [[shard, key, members]]}.

    Shards are indexed workers at a time: on a mount each index is a chain of
    small GETs (or a read of the cache dir), so shards are the parallelism."""
    shards = find_shards(root)
    samples = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for s, members in enumerate(pool.map(index_shard, shards)):
            samples += [[s, key, m] for key, m in members]
    return {"root": os.path.abspath(root), "shards": [os.path.relpath(p, root) for p in shards], "samples": samples}


class TarIndexDataset(Dataset):
    """dataset[i] -> {"__key__", "__shard__", ext: decoded member, ...}."""

    def __init__(self, root, index_path=None, decode=decode_member):
        self.root = root
        self.decode = decode
        index = None
        if index_path and os.path.exists(index_path):
            with open(index_path) as f:
                index = json.load(f)
        if index is None:
            index = build_index(root)
            if index_path:
                tmp = index_path + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(index, f)
                os.replace(tmp, index_path)
        self.shards = [os.path.join(root, rel) for rel in index["shards"]]
        self.samples = index["samples"]
        self._fds = {}
        self._pid = None

    def __len__(self):
        return len(self.samples)

    def _fd(self, shard):
        # Descriptors must not cross fork(): each worker opens its own.
        if self._pid != os.getpid():
            self._fds, self._pid = {}, os.getpid()
        fd = self._fds.get(shard)
        if fd is None:
            fd = self._fds[shard] = os.open(self.shards[shard], os.O_RDONLY)
        return fd

    def __getitem__(self, i):
        shard, key, members = self.samples[i]
        fd = self._fd(shard)
        sample = {"__key__": key, "__shard__": self.shards[shard]}
        for ext, (offset, size) in members.items():
            data = os.pread(fd, size, offset)
            while len(data) < size:  # pread may return short; never at EOF inside a member
                more = os.pread(fd, size - len(data), offset + len(data))
                if not more:
                    raise OSError(f"{self.shards[shard]}: member {key}.{ext} truncated at {len(data)} of {size} bytes")
                data += more
            sample[ext] = self.decode(ext, data)
        return sample

    def __del__(self):
        if self._pid == os.getpid():
            for fd in self._fds.values():
                os.close(fd)
