"""A WebDataset-style IterableDataset over .tar shards, for a plain DataLoader.

Each sample is the run of tar members that share a key (KEY.cls, KEY.jpg,
KEY.json, ...). Shards are split first across ranks (RANK/WORLD_SIZE, the
variables torchrun sets, or the rank/world_size arguments), then across the
DataLoader workers of this rank, so every shard is read by exactly one worker
of one rank per epoch. Members are streamed with tarfile in order: one
sequential read per shard, the pattern a shardfs mount reads ahead for.

On a shardfs mount the dataset also writes the shards it is about to open to
MNT/.shardfs/hints, so the mount fetches the next shard while the current one
is being decoded. On any other directory the hints are simply skipped.
Without torch installed it is a plain iterable (one process, no workers).

    from torch.utils.data import DataLoader
    from shardfs import TarShards
    loader = DataLoader(TarShards("/mnt/wds"), batch_size=None, num_workers=4)
    for sample in loader:
        sample["__key__"], sample["cls"], sample["jpg"], sample["json"]
"""

import json
import os
import random
import tarfile

from .hints import Hints

try:
    from torch.utils.data import IterableDataset, get_worker_info
except ImportError:  # torch is optional: without it the dataset is a plain iterable
    IterableDataset = object

    def get_worker_info():
        return None


def find_shards(root):
    """Returns the .tar files under root (recursively), in a stable order."""
    shards = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".shardfs")
        shards += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".tar")]
    return shards


def decode_member(ext, data):
    """Default decoding by extension: class ids to int, JSON parsed, the rest raw bytes."""
    if ext in ("cls", "idx", "label"):
        return int(data)
    if ext == "json":
        return json.loads(data)
    if ext in ("txt", "text"):
        return data.decode()
    return data


def split_key(name):
    """Splits a member name into (sample key, extension) the WebDataset way:
    the key ends at the first dot of the last path component."""
    directory, _, base = name.rpartition("/")
    stem, _, ext = base.partition(".")
    return (directory + "/" + stem if directory else stem), ext


class TarShards(IterableDataset):
    """Yields one dict per sample: {"__key__", "__shard__", ext: decoded member, ...}.

    shards: a directory (searched recursively for .tar) or a list of paths.
    rank, world_size: this process's share; default from RANK and WORLD_SIZE.
    shuffle_seed: if set, shards are shuffled (same order on every rank) with
        seed + epoch; call set_epoch(epoch) before each epoch.
    hint_lookahead: shards announced ahead to a shardfs mount (0 disables).
    """

    def __init__(self, shards, rank=None, world_size=None, decode=decode_member,
                 shuffle_seed=None, hint_lookahead=2):
        self.shards = find_shards(shards) if isinstance(shards, (str, os.PathLike)) else list(shards)
        self.rank = int(os.environ.get("RANK", 0)) if rank is None else rank
        self.world_size = int(os.environ.get("WORLD_SIZE", 1)) if world_size is None else world_size
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is not in [0, {self.world_size})")
        self.decode = decode
        self.shuffle_seed = shuffle_seed
        self.hint_lookahead = hint_lookahead
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def worker_shards(self, worker_id=0, num_workers=1):
        """The shards one worker of this rank reads this epoch: shards[rank::world][worker::workers]."""
        order = list(self.shards)
        if self.shuffle_seed is not None:
            random.Random(self.shuffle_seed + self.epoch).shuffle(order)
        return order[self.rank :: self.world_size][worker_id::num_workers]

    def __iter__(self):
        info = get_worker_info()
        mine = self.worker_shards(info.id, info.num_workers) if info else self.worker_shards()
        hints = Hints(mine, self.hint_lookahead)
        for i, shard in enumerate(mine):
            hints.advance(i)
            yield from self.samples(shard)

    def samples(self, shard):
        """Streams one shard and yields its samples in order."""
        with open(shard, "rb", buffering=1 << 20) as f, tarfile.open(fileobj=f, mode="r|") as tar:
            sample = None
            for member in tar:
                if not member.isfile():
                    continue
                key, ext = split_key(member.name)
                if sample is not None and sample["__key__"] != key:
                    yield sample
                    sample = None
                if sample is None:
                    sample = {"__key__": key, "__shard__": shard}
                sample[ext] = self.decode(ext, tar.extractfile(member).read())
            if sample is not None:
                yield sample
