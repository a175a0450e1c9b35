#!/usr/bin/python3
"""Writes tar shards that exercise a member index, and Python's own listing of each.

    gen_index_shards.py OUT [--samples N] [--sidecars] [--seed S]
    gen_index_shards.py --sidecars-for DIR     # a sidecar beside every DIR/*.tar

OUT/shards/ gets, in each of the three formats tarfile writes (ustar, gnu,
pax), a WebDataset-style shard (KEY.cls, KEY.jpg, KEY.json) and a shard of
odd members: names past 100 and 255 bytes (GNU long-name and PAX headers),
non-ASCII names, empty members, directories, a symlink, a hidden file.
OUT/expect/KEY.jsonl is tarfile's listing of shard KEY: one line per member
that isfile(), {"name", "offset" (of its data), "size"}, in archive order.
With --sidecars, each WebDataset-style shard gets a DALI wds2idx v1.2 text
index beside it (shard.idx): "v1.2 SAMPLES", then one line per sample of
"EXT OFFSET SIZE NAME" groups. The same arguments give the same bytes.
"""

import argparse
import io
import json
import os
import random
import tarfile

MTIME = 1700000000
FORMATS = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}


def add(tar, name, data=b"", kind=tarfile.REGTYPE, link=""):
    info = tarfile.TarInfo(name)
    info.mtime, info.type, info.linkname = MTIME, kind, link
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def webdataset_shard(tar, rng, samples):
    for i in range(samples):
        key = f"sample{i:05d}"
        jpg = rng.randbytes(rng.randrange(20 << 10, 120 << 10))
        add(tar, key + ".cls", str(rng.randrange(1000)).encode())
        add(tar, key + ".jpg", jpg)
        add(tar, key + ".json", json.dumps({"key": key, "size": len(jpg)}).encode())


def odd_shard(tar, rng, fmt):
    add(tar, "data/", kind=tarfile.DIRTYPE)
    add(tar, "data/empty.txt")
    add(tar, "data/one-byte.bin", b"x")
    add(tar, "data/block.bin", rng.randbytes(512))
    add(tar, "data/.hidden.cls", b"7")
    add(tar, "data/link.jpg", kind=tarfile.SYMTYPE, link="block.bin")
    if fmt != "ustar":
        deep = "data/" + "/".join(["d" * 60] * 3) + "/"
        add(tar, deep, kind=tarfile.DIRTYPE)
        add(tar, deep + "long-" + "n" * 120 + ".jpg", rng.randbytes(70_000))
        add(tar, deep + "longer-" + "m" * 300 + ".json", b"{}")
        add(tar, "data/ünïcødé 数据 #1.txt", "π".encode() * 100)
    else:
        # ustar splits a name of up to 255 bytes into prefix and name.
        add(tar, "data/" + "p" * 120 + "/short.jpg", rng.randbytes(3000))
    add(tar, "data/zero-at-end.txt")


def listing(path):
    with tarfile.open(path) as t:
        return [{"name": m.name, "offset": m.offset_data, "size": m.size} for m in t if m.isfile()]


def write_sidecar(path, members):
    samples = []
    for m in members:
        base = m["name"].rsplit("/", 1)[-1]
        stem, _, ext = base.partition(".")
        key = m["name"][: len(m["name"]) - len(base)] + stem
        if not samples or samples[-1][0] != key:
            samples.append((key, []))
        samples[-1][1].append(f"{ext} {m['offset']} {m['size']} {m['name']}")
    with open(path, "w") as f:
        f.write(f"v1.2 {len(samples)}\n")
        for _, parts in samples:
            f.write(" ".join(parts) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", nargs="?")
    p.add_argument("--sidecars-for", metavar="DIR", help="only write a sidecar beside every DIR/*.tar")
    p.add_argument("--samples", type=int, default=40)
    p.add_argument("--sidecars", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.sidecars_for:
        for name in sorted(os.listdir(args.sidecars_for)):
            if name.endswith(".tar"):
                path = os.path.join(args.sidecars_for, name)
                write_sidecar(path[: -len(".tar")] + ".idx", listing(path))
        return
    if not args.out:
        p.error("OUT is required")
    rng = random.Random(args.seed)
    for sub in ("shards", "expect"):
        os.makedirs(os.path.join(args.out, sub), exist_ok=True)
    for fmt, code in FORMATS.items():
        for kind in ("wds", "odd"):
            key = f"{kind}-{fmt}.tar"
            path = os.path.join(args.out, "shards", key)
            with tarfile.open(path, "w", format=code) as tar:
                if kind == "wds":
                    webdataset_shard(tar, rng, args.samples)
                else:
                    odd_shard(tar, rng, fmt)
            members = listing(path)
            with open(os.path.join(args.out, "expect", key + ".jsonl"), "w") as f:
                for m in members:
                    f.write(json.dumps(m, separators=(",", ":"), ensure_ascii=False) + "\n")
            if args.sidecars and kind == "wds":
                write_sidecar(os.path.join(args.out, "shards", key[: -len(".tar")] + ".idx"), members)


if __name__ == "__main__":
    main()
