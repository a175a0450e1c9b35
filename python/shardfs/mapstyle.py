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
    loader = DataLoader(ds, batch_size=None, sampler=ScheduledSampler(ds), num_workers=4)

ScheduledSampler wraps the epoch's sampler (RandomSampler by default; a
DistributedSampler for ranks, set_epoch passed on) and, on a shardfs mount,
writes the byte ranges of the coming samples to /.shardfs/hints in the order
the sampler yields them (PATH OFFSET LENGTH lines), a window ahead: the mount
fetches them in that order before the workers ask.

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
    from torch.utils.data import Dataset, Sampler
except ImportError:  # torch is optional: without it the dataset is a plain sequence
    Dataset = Sampler = object

_UNKNOWN = object()  # a TarIndexDataset's mount before it is looked for


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
        self._mount = _UNKNOWN
        self._mount_paths = None  # each shard's path inside the mount, once it is found

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

    def sample_ranges(self, i):
        """[(shard path, offset, size)]: the byte ranges dataset[i] reads, one per member, in the
        order it reads them."""
        shard, _, members = self.samples[i]
        return [(self.shards[shard], offset, size) for offset, size in members.values()]

    def write_schedule(self, indices):
        """Tells the mount holding the shards that dataset[i] is read next for each i of
        indices, in that order, in one write: a PATH OFFSET LENGTH line per member, exactly
        the bytes dataset[i] reads (the mount joins neighbours into one GET). Returns the
        lines written: 0 off a shardfs mount or when the write fails (a schedule only makes
        reads faster)."""
        if self._mount is _UNKNOWN:
            self._mount = find_mount(self.root)
            # Each shard's path inside the mount, once: the sampler writes a line per member of
            # every sample, from the DataLoader's main process, which also hands out the batches.
            if self._mount is not None:
                self._mount_paths = [os.path.relpath(os.path.abspath(p), self._mount.root) for p in self.shards]
        if self._mount is None:
            return 0
        lines = []
        for i in indices:
            shard, _, members = self.samples[i]
            path = self._mount_paths[shard]
            for offset, size in members.values():  # as sample_ranges(i), in the order dataset[i] reads them
                if size > 0:
                    lines.append("%s %d %d\n" % (path, offset, size))
        try:
            with open(self._mount.hints, "w") as f:
                f.write("".join(lines))
        except OSError:
            self._mount = None  # a mount that refuses the schedule: stop trying
            return 0
        return len(lines)

    def __del__(self):
        if self._pid == os.getpid():
            for fd in self._fds.values():
                os.close(fd)


class ScheduledSampler(Sampler):
    """Yields the indices of sampler (default: a fresh random permutation per epoch) and keeps
    the byte ranges of the next `lookahead` samples written to the dataset's mount, in order.

    The sampler runs in the DataLoader's main process, which hands batches to the workers in
    the order it draws them; so the order it yields is the order samples are read, across
    all workers, and one schedule per process (per rank) says it all. Each epoch's
    permutation is drawn whole first, as RandomSampler and DistributedSampler do anyway;
    set_epoch is passed on. Off a shardfs mount it yields the same indices and writes nothing.
    """

    def __init__(self, dataset, sampler=None, lookahead=1024):
        if sampler is None:
            sampler = _random_sampler(dataset)
        self.dataset = dataset
        self.sampler = sampler
        self.lookahead = max(int(lookahead), 1)

    def __len__(self):
        return len(self.sampler)

    def set_epoch(self, epoch):
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self):
        order = list(self.sampler)
        sent, writing = 0, True
        for i, index in enumerate(order):
            # Written half a window at a time: at least lookahead/2 samples ahead of the reader.
            if writing and sent < len(order) and sent - i <= self.lookahead // 2:
                upto = min(len(order), i + self.lookahead)
                writing = self.dataset.write_schedule(order[sent:upto]) > 0
                sent = upto
            yield index


def _random_sampler(dataset):
    try:
        from torch.utils.data import RandomSampler
    except ImportError:  # without torch: a shuffled list of every index
        import random

        return random.sample(range(len(dataset)), len(dataset))
    return RandomSampler(dataset)
