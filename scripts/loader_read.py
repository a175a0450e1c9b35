#!/usr/bin/python3
"""Reads every .tar shard under a directory the way a training job does.

A torch.utils.data.DataLoader with N workers streams the shards with tarfile
(each worker takes shards[worker::N], as WebDataset splits them), groups the
members of each sample by key and verifies the sample against its .json
(class id, size and sha256 of the .jpg). Prints throughput and, with
--expect-samples, fails unless exactly that many valid samples were read.
The last line is "RESULT {json}" for scripts and tests.
"""

import argparse
import hashlib
import json
import os
import sys
import tarfile
import time
import warnings

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


def find_shards(root):
    shards = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        shards += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".tar")]
    return shards


def check_sample(key, members):
    """Returns "" when the sample is whole and consistent, else what is wrong."""
    try:
        meta = json.loads(members[".json"])
        jpg = members[".jpg"]
        cls = int(members[".cls"])
    except (KeyError, ValueError) as e:
        return f"sample {key}: incomplete or unreadable ({e!r})"
    if meta["key"] != key or meta["cls"] != cls:
        return f"sample {key}: metadata mismatch"
    if len(jpg) != meta["jpg_size"] or hashlib.sha256(jpg).hexdigest() != meta["jpg_sha256"]:
        return f"sample {key}: .jpg bytes differ from their recorded sha256"
    return ""


class TarSamples(IterableDataset):
    """Yields (shard, key, label, payload bytes, problem) per sample."""

    def __init__(self, shards):
        self.shards = shards

    def __iter__(self):
        info = get_worker_info()
        mine = self.shards[info.id :: info.num_workers] if info else self.shards
        for shard in mine:
            with open(shard, "rb", buffering=1 << 20) as f, tarfile.open(fileobj=f, mode="r|") as tar:
                key, members = None, {}
                for m in tar:
                    base, dot, ext = m.name.partition(".")
                    if base != key and key is not None:
                        yield self.sample(shard, key, members)
                        members = {}
                    key = base
                    members["." + ext] = tar.extractfile(m).read()
                if key is not None:
                    yield self.sample(shard, key, members)

    @staticmethod
    def sample(shard, key, members):
        problem = check_sample(key, members)
        label = int(members.get(".cls", b"-1") or -1)
        return shard, key, label, len(members.get(".jpg", b"")), problem


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("root", help="directory holding .tar shards (searched recursively)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--expect-samples", type=int, default=-1)
    args = p.parse_args()
    # More workers than cores is deliberate: they wait on I/O, not on the CPU.
    warnings.filterwarnings("ignore", message="This DataLoader will create")

    shards = find_shards(args.root)
    total_bytes = sum(os.path.getsize(s) for s in shards)
    loader = DataLoader(TarSamples(shards), batch_size=None, num_workers=args.workers)

    start = time.monotonic()
    samples, problems, keys = 0, [], set()
    for shard, key, label, size, problem in loader:
        samples += 1
        if problem:
            problems.append(f"{shard}: {problem}")
        if (shard, key) in keys:
            problems.append(f"{shard}: sample {key} seen twice")
        keys.add((shard, key))
    elapsed = max(time.monotonic() - start, 1e-9)

    mb = total_bytes / 1e6
    print(f"read {len(shards)} shards, {samples} samples, {mb:.1f} MB in {elapsed:.2f}s "
          f"with {args.workers} DataLoader workers (torch {torch.__version__})")
    print(f"throughput: {mb / elapsed:.1f} MB/s, {samples / elapsed:.0f} samples/s")
    for line in problems[:20]:
        print("BAD:", line, file=sys.stderr)
    ok = not problems and (args.expect_samples < 0 or samples == args.expect_samples)
    if args.expect_samples >= 0 and samples != args.expect_samples:
        print(f"BAD: expected {args.expect_samples} samples, read {samples}", file=sys.stderr)
    result = {"shards": len(shards), "samples": samples, "bytes": total_bytes, "seconds": elapsed,
              "problems": len(problems), "ok": ok}
    print("RESULT " + json.dumps(result))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
