#!/usr/bin/python3
"""Writes deterministic WebDataset-style .tar shards (standard library only).

Each sample KEY is three tar members: KEY.cls (class id as text), KEY.jpg
(seeded random bytes standing in for an image) and KEY.json (key, class, size
and sha256 of the .jpg), so a reader can verify every sample on its own.
The same arguments always produce byte-identical files.

    gen_shards.py OUT COUNT SAMPLES_PER_SHARD SAMPLE_SIZE [extras]

Layout: OUT/shard-000000.tar ... plus, on request, a large shard, an empty
object, shards under a nested prefix and a shard whose name has spaces and
non-ASCII characters. --summary writes {"shards", "samples", "bytes"} as JSON.
"""

import argparse
import hashlib
import io
import json
import os
import random
import sys
import tarfile

MTIME = 1700000000  # fixed member mtime keeps the archives reproducible
ODD_NAME = "odd names/shard ünïcødé 数据 #1.tar"


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    suffix = text[-1] if text and text[-1] in units else ""
    return int(float(text[: len(text) - len(suffix)]) * units[suffix])


def sample_members(index, size, seed):
    """Returns the (name, bytes) members of sample number index."""
    key = f"{index:06d}"
    rng = random.Random(seed * 1_000_003 + index)
    cls = rng.randrange(1000)
    jpg = rng.randbytes(size)
    meta = {"key": key, "cls": cls, "jpg_size": size, "jpg_sha256": hashlib.sha256(jpg).hexdigest()}
    return [
        (key + ".cls", str(cls).encode()),
        (key + ".jpg", jpg),
        (key + ".json", json.dumps(meta, sort_keys=True).encode()),
    ]


def write_shard(path, first, count, size, seed):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for index in range(first, first + count):
            for name, data in sample_members(index, size, seed):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = MTIME
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
    return os.path.getsize(path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="output directory")
    p.add_argument("count", type=int, help="number of regular shards")
    p.add_argument("samples", type=int, help="samples per shard")
    p.add_argument("sample_size", type=parse_size, help="bytes of each sample's .jpg (e.g. 64K)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--large", type=parse_size, default=0, metavar="SIZE",
                   help="also write large/shard-large.tar of at least SIZE bytes (4 MiB samples)")
    p.add_argument("--empty", metavar="NAME", help="also write a zero-byte object NAME")
    p.add_argument("--nested", metavar="PREFIX", help="also write --nested-count shards under PREFIX/")
    p.add_argument("--nested-count", type=int, default=2)
    p.add_argument("--odd-name", action="store_true",
                   help=f"also write a shard named {ODD_NAME!r}")
    p.add_argument("--summary", metavar="FILE", help="write shard/sample/byte totals as JSON")
    args = p.parse_args()

    shards = samples = total = 0
    index = 0  # sample numbers are unique across the whole set

    def shard(rel, count, size):
        nonlocal shards, samples, total, index
        total += write_shard(os.path.join(args.out, rel), index, count, size, args.seed)
        shards += 1
        samples += count
        index += count

    for i in range(args.count):
        shard(f"shard-{i:06d}.tar", args.samples, args.sample_size)
    if args.nested:
        for i in range(args.nested_count):
            shard(f"{args.nested.strip('/')}/shard-{i:06d}.tar", args.samples, args.sample_size)
    if args.odd_name:
        shard(ODD_NAME, args.samples, args.sample_size)
    if args.large:
        big = 4 << 20
        shard("large/shard-large.tar", -(-args.large // big), big)
    if args.empty:
        path = os.path.join(args.out, args.empty)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        open(path, "wb").close()

    summary = {"shards": shards, "samples": samples, "bytes": total}
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump(summary, f)
    print(json.dumps(summary), file=sys.stderr)


if __name__ == "__main__":
    main()
