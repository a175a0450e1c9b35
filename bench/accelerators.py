#!/usr/bin/python3
"""Emulated accelerators over a directory of training data, DLIO's way.

N accelerator processes start together. Each one owns a DataLoader over its
share of the data (rank r of N) and runs a training loop in which the
"accelerator" sleeps a fixed compute time per batch. Accelerator
utilization (AU) is the compute time over the wall time of the measured
steps, measured over a window of --window seconds after the first batch
(DataLoader workers starting, first open), MLPerf Storage's way. An
accelerator that reaches the end of its share starts another epoch over it;
"epochs" says how many a run took, as a later epoch may be served from the
page cache.

Models (sizes are the data set's, these are the shapes):
  resnet50  WebDataset tar shards of ~100 KiB samples, streamed with
            shardfs.TarShards (shards split across accelerators, then workers)
  unet3d    one large sample per file, a map-style dataset reading whole
            files in shuffled order (files split across accelerators)

The last line is one JSON object: mean AU, per-accelerator AU, samples and
bytes read, the rate one accelerator needs to stay busy and the rate each
got (MB/s), CPU seconds of the loader processes. `shardfs bench run` runs
this for the accelerators workload.

    accelerators.py ROOT --model resnet50 --accelerators 4 --batch 32 \\
        --compute-time 0.1 --window 30 --workers 2
"""

import argparse
import json
import multiprocessing as mp
import os
import resource
import sys
import time
import warnings

import torch
from torch.utils.data import DataLoader, Dataset

import shardfs


def size_only(ext, data):
    """The loader keeps nothing of a member but its size: decoding is the
    training job's cost, not the storage's."""
    return len(data)


class WholeFiles(Dataset):
    """Map-style: item i is the whole content of files[i] (its size, once read)."""

    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with open(self.files[i], "rb", buffering=0) as f:
            n = 0
            while True:
                chunk = f.read(8 << 20)
                if not chunk:
                    return n
                n += len(chunk)


def batch_bytes(batch):
    """collate_fn: a batch becomes (samples, bytes) so nothing large crosses
    from the workers to the accelerator process."""
    if batch and isinstance(batch[0], dict):
        return len(batch), sum(v for s in batch for k, v in s.items() if not k.startswith("__"))
    return len(batch), sum(batch)


def make_loader(args, rank):
    common = dict(batch_size=args.batch, num_workers=args.workers, collate_fn=batch_bytes,
                  prefetch_factor=args.prefetch if args.workers else None)
    if args.model == "resnet50":
        ds = shardfs.TarShards(args.root, rank=rank, world_size=args.accelerators, decode=size_only)
        return DataLoader(ds, **common)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(args.root) for f in fs if not f.startswith("."))
    ds = WholeFiles(files[rank::args.accelerators])
    g = torch.Generator()
    g.manual_seed(args.seed + rank)
    return DataLoader(ds, shuffle=True, generator=g, **common)


def batches(loader):
    """Yields the loader's batches epoch after epoch, with the epoch number."""
    epoch = 0
    while True:
        epoch += 1
        empty = True
        for batch in loader:
            empty = False
            yield epoch, batch
        if empty:
            raise RuntimeError("this accelerator's share of the data is empty")


def accelerator(args, rank, start_barrier, results):
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    loader = make_loader(args, rank)
    start_barrier.wait()
    try:
        it = batches(loader)
        next(it)  # not measured: workers start, the first files open
        samples = nbytes = steps = epoch = 0
        wait_max = 0.0
        begin = time.monotonic()
        while time.monotonic() - begin < args.window:
            t0 = time.monotonic()
            epoch, (n, b) = next(it)
            wait_max = max(wait_max, time.monotonic() - t0)
            time.sleep(args.compute_time)  # the accelerator computes; the loader keeps reading
            samples, nbytes, steps = samples + n, nbytes + b, steps + 1
        wall = time.monotonic() - begin
        del it  # the workers stop before this process reports
    except Exception as e:  # reported as the run's error, with the rank
        results.put({"rank": rank, "error": "accelerator %d: %s" % (rank, e)})
        return
    results.put({"rank": rank, "steps": steps, "wall": wall, "au": steps * args.compute_time / wall,
                 "samples": samples, "bytes": nbytes, "max_wait": wait_max, "epochs": epoch})


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root")
    p.add_argument("--model", choices=["resnet50", "unet3d"], required=True)
    p.add_argument("--accelerators", type=int, default=1)
    p.add_argument("--batch", type=int, required=True, help="samples per step of one accelerator")
    p.add_argument("--compute-time", type=float, required=True, help="seconds one accelerator computes per batch")
    p.add_argument("--window", type=float, default=30, help="seconds measured after the first batch")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers per accelerator")
    p.add_argument("--prefetch", type=int, default=2, help="batches each worker reads ahead")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    ctx = mp.get_context("fork")  # torch is imported once, here
    barrier, results = ctx.Barrier(args.accelerators), ctx.Queue()
    procs = [ctx.Process(target=accelerator, args=(args, r, barrier, results)) for r in range(args.accelerators)]
    for proc in procs:
        proc.start()
    per = sorted((results.get() for _ in procs), key=lambda r: r["rank"])
    for proc in procs:
        proc.join()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    errors = [r["error"] for r in per if "error" in r]
    out = {"model": args.model, "window": args.window, "accelerators": args.accelerators, "batch": args.batch,
           "compute_time": args.compute_time, "workers": args.workers, "errors": errors}
    if not errors:
        out.update({
            "au": sum(r["au"] for r in per) / len(per),
            "au_min": min(r["au"] for r in per),
            "per_accelerator_au": [round(r["au"], 4) for r in per],
            "samples": sum(r["samples"] for r in per),
            "bytes": sum(r["bytes"] for r in per),
            "wall": max(r["wall"] for r in per),
            "max_wait": max(r["max_wait"] for r in per),
            "epochs": max(r["epochs"] for r in per),
            "needed_mbps_per_accelerator": sum(r["bytes"] for r in per) / sum(r["steps"] for r in per) / args.compute_time / 1e6,
            "got_mbps_per_accelerator": sum(r["bytes"] / r["wall"] for r in per) / len(per) / 1e6,
            "loader_cpu_s": usage.ru_utime + usage.ru_stime,
        })
    print(json.dumps(out))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
