#!/usr/bin/python3
"""Runs epochs of a DataLoader over one of the example datasets and checks them.

For every epoch it counts each (shard, key) it sees and, unless --no-verify,
checks each sample against its .json (class id, size and sha256 of the .jpg).
The last line is "RESULT {json}": per epoch the number of samples, the samples
seen per shard, duplicates and bad samples (the first few of each), and
samples/s. Exits 1 when any epoch has a duplicate or a bad sample, or when
--expect-samples is given and an epoch saw another number.

    check_epochs.py ROOT --dataset iterable|map --workers 4 [--epochs 2]
                    [--rank R --world-size W] [--no-hints]

The map-style loader shuffles with RandomSampler (DistributedSampler across
ranks) and, unless --no-hints, wraps it in shardfs.ScheduledSampler, which
writes each epoch's sample order to the mount as a schedule.
"""

import argparse
import hashlib
import json
import os
import sys
import time
import warnings
from collections import Counter

import torch
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

from shardfs import ScheduledSampler, TarIndexDataset, TarShards

KEEP = 10  # problems reported per kind and epoch


def problem(sample):
    """Returns "" when the sample is whole and matches its .json, else what is wrong."""
    key = sample["__key__"]
    try:
        meta, jpg, cls = sample["json"], sample["jpg"], sample["cls"]
    except KeyError as e:
        return f"sample {key}: member {e} missing"
    if meta.get("key") != key or meta.get("cls") != cls:
        return f"sample {key}: .json says key {meta.get('key')!r} cls {meta.get('cls')!r}, members say {key!r} {cls!r}"
    if len(jpg) != meta["jpg_size"]:
        return f"sample {key}: .jpg has {len(jpg)} bytes, .json says {meta['jpg_size']}"
    digest = hashlib.sha256(jpg).hexdigest()
    if digest != meta["jpg_sha256"]:
        return f"sample {key}: .jpg sha256 {digest}, .json says {meta['jpg_sha256']}"
    return ""


def make_loader(args, epoch):
    if args.dataset == "iterable":
        ds = TarShards(args.root, rank=args.rank, world_size=args.world_size,
                       hint_lookahead=0 if args.no_hints else 2)
        ds.set_epoch(epoch)
        return DataLoader(ds, batch_size=None, num_workers=args.workers)
    ds = TarIndexDataset(args.root, index_path=args.index)
    if args.world_size > 1:
        sampler = DistributedSampler(ds, num_replicas=args.world_size, rank=args.rank, shuffle=True, seed=args.seed)
    else:
        sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(args.seed + epoch))
    if not args.no_hints:
        # The epoch's order, written to the mount as a sample schedule a window ahead.
        sampler = ScheduledSampler(ds, sampler)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)
    return DataLoader(ds, batch_size=None, sampler=sampler, num_workers=args.workers)


def run_epoch(args, epoch):
    loader = make_loader(args, epoch)
    seen, per_shard = Counter(), Counter()
    duplicates, bad = [], []
    start = time.monotonic()
    for sample in loader:
        shard = os.path.relpath(sample["__shard__"], args.root)
        ident = (shard, sample["__key__"])
        seen[ident] += 1
        per_shard[shard] += 1
        if seen[ident] == 2 and len(duplicates) < KEEP:
            duplicates.append(f"{shard}: {sample['__key__']}")
        if not args.no_verify:
            p = problem(sample)
            if p and len(bad) < KEEP:
                bad.append(f"{shard}: {p}")
            elif p:
                bad.append(None)
    seconds = max(time.monotonic() - start, 1e-9)
    samples = sum(per_shard.values())
    return {
        "epoch": epoch,
        "samples": samples,
        "unique": len(seen),
        "per_shard": dict(sorted(per_shard.items())),
        "duplicates": duplicates,
        "duplicate_count": sum(n - 1 for n in seen.values()),
        "bad": [b for b in bad if b],
        "bad_count": len(bad),
        "seconds": seconds,
        "samples_per_second": samples / seconds,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", help="directory of .tar shards (a shardfs mount or a local copy)")
    p.add_argument("--dataset", choices=["iterable", "map"], default="iterable")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--index", help="map-style index file (built on first use)")
    p.add_argument("--expect-samples", type=int, default=-1)
    p.add_argument("--no-verify", action="store_true", help="count samples without hashing them")
    p.add_argument("--seed", type=int, default=0, help="shuffle seed of the map-style sampler")
    p.add_argument("--no-hints", action="store_true",
                   help="do not write MNT/.shardfs/hints (iterable: the next shards; map: the sample schedule)")
    args = p.parse_args()
    # More workers than cores is deliberate: they wait on I/O, not on the CPU.
    warnings.filterwarnings("ignore", message="This DataLoader will create")

    epochs = [run_epoch(args, e) for e in range(args.epochs)]
    ok = all(e["duplicate_count"] == 0 and e["bad_count"] == 0 and
             (args.expect_samples < 0 or e["samples"] == args.expect_samples) for e in epochs)
    for e in epochs:
        print(f"epoch {e['epoch']}: {e['samples']} samples ({e['unique']} distinct) from {len(e['per_shard'])} shards "
              f"in {e['seconds']:.2f}s, {e['samples_per_second']:.0f} samples/s, "
              f"{e['duplicate_count']} duplicates, {e['bad_count']} bad")
    result = {"dataset": args.dataset, "workers": args.workers, "epochs": epochs, "ok": ok}
    print("RESULT " + json.dumps(result))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
