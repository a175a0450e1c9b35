"""read_into in interleaved rounds against its ceiling.

    python3 gds/python/gpu_rounds.py --mount MNT --file REL [--chunk 8M] [--rounds 5] [--seconds 1.5] [--host] [--ring]

RAM tier (default; a mount with --memory-cache-shared on): each round
measures, in a rotating order, a plain torch copy out of pinned memory
(a pinned buffer the file's size, copied chunk by chunk in the same order:
host memory is read at the rate the tier's is, not out of one chunk the
processor's caches hold),
read_into by DMA out of the mount's shared RAM tier (LEASE_FROM_RAM), and
read_into staged through a READ into the client's buffer (ram_direct=False,
whole_files=False: a shard warmed whole would otherwise be read from its
file on disk). The file is READ twice first, which puts it in the RAM tier
(the mount's --memory-cache-size must hold it).

Ring (--ring; a mount with --memory-cache-size 0): this process reading the
leased ring extents itself with O_DIRECT, the disk's ceiling, against
read_into (pipelined, ring extents leased and read by the client). The file
is read once first, which puts it in the ring.

Each row reads the file's chunks in order; the rounds print GB/s, the
daemon's and this process's CPU-seconds per GB (/proc/PID/stat, os.times)
and the ratio to the ceiling, then each ratio's median. With --host (or
without CUDA) dst is a numpy array, and the RAM rows have no pinned copy:
staged is the base. The bytes read are compared with the file first.
"""

import argparse
import os
import sys
import time

import numpy as np

import shardfs.gpu as gds
from gpu_bench import daemon_cpu_seconds, ring_reader


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mount", required=True)
    ap.add_argument("--file", required=True, help="shard to read, relative to the mount")
    ap.add_argument("--chunk", type=size_arg, default=8 << 20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--host", action="store_true", help="read into host memory (numpy), no GPU")
    ap.add_argument("--ring", action="store_true", help="the ring rows (a mount without a RAM tier)")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    host = a.host or torch is None or not torch.cuda.is_available()
    if host and not a.host:
        print("no CUDA device (or no torch with CUDA): host memory rows only")
    mnt, rel, chunk = a.mount, a.file, a.chunk
    size = os.path.getsize(os.path.join(mnt, rel))
    offs = list(range(0, size - chunk + 1, chunk))
    if len(offs) < 2:
        raise SystemExit("%s: %d bytes, fewer than two chunks of %d" % (rel, size, chunk))
    with open(os.path.join(mnt, rel), "rb") as f:
        want = os.pread(f.fileno(), chunk, offs[1])
    if host:
        dev = np.empty(chunk, np.uint8)
        sync = lambda: None  # noqa: E731
        equal = lambda: dev.tobytes() == want  # noqa: E731
    else:
        dev = torch.empty(chunk, dtype=torch.uint8, device="cuda")
        pinned = torch.empty(offs[-1] + chunk, dtype=torch.uint8).pin_memory()
        want_dev = torch.frombuffer(bytearray(want), dtype=torch.uint8).cuda()
        sync = torch.cuda.synchronize
        equal = lambda: bool(torch.equal(dev, want_dev))  # noqa: E731
    cpu = lambda: daemon_cpu_seconds(mnt)  # noqa: E731

    def check(name, c):
        dev[:] = 0
        c.read_into(dev, rel, offs[1], chunk)
        sync()
        if not equal():
            raise SystemExit("%s read_into: bytes differ from the file" % name)

    def rate(fn):
        fn(0)
        sync()
        n, t, d, c = 0, time.perf_counter(), cpu(), sum(os.times()[:2])
        while True:
            fn(n)
            n += 1
            if n % 8 == 0 and time.perf_counter() - t >= a.seconds:
                break
        sync()
        gb = n * chunk / 1e9
        return gb / (time.perf_counter() - t), (cpu() - d) / gb, (sum(os.times()[:2]) - c) / gb

    leased = None

    def read(c):
        return lambda i: c.read_into(dev, rel, offs[i % len(offs)], chunk)

    with gds.Client(mnt, buffer_size=2 * chunk) as ram, \
            gds.Client(mnt, buffer_size=2 * chunk, ram_direct=False, whole_files=False) as staged:
        if a.ring:
            if not staged.capabilities().get("leases"):
                raise SystemExit("the mount has no cache ring")
            with open(os.path.join(mnt, rel), "rb") as f:  # into the ring
                while f.read(8 << 20):
                    pass
            # Chunks of a quarter of the read: read_into pipelines them
            # (four at least) through leases of the ring.
            leased = gds.Client(mnt, buffer_size=2 * chunk, chunk_size=chunk // 4, ram_direct=False, whole_files=False)
            check("leased ring", leased)
            if leased.last_path != "lease":
                raise SystemExit("read_into took path %s, not the leased ring (a RAM tier holds the file?)"
                                 % leased.last_path)
            ring = ring_reader(staged, rel, chunk)
            rows = {"read_into, leased ring": read(leased),
                    "O_DIRECT pread of the leased extents": lambda i: ring(offs[i % len(offs)])}
            base = "O_DIRECT pread of the leased extents"
        else:
            if not ram.ram_leases_available():
                raise SystemExit("the mount's RAM tier is not shared (mount with --memory-cache-shared on)")
            for _ in range(2):  # READs of ring blocks fill the RAM tier
                for o in offs:
                    staged.read(rel, o, chunk, staged.staging)
            check("ram lease", ram)
            check("staged", staged)
            if ram.last_path != "ram lease":
                raise SystemExit("read_into from the RAM tier took path %s: the tier does not hold the file"
                                 % ram.last_path)
            rows = {"ram lease": read(ram), "staged": read(staged)}
            if not host:
                rows["pinned copy"] = lambda i: dev.copy_(pinned[offs[i % len(offs)]:][:chunk], non_blocking=True)
            base = "staged" if host else "pinned copy"
        names = list(rows)
        res = {k: [] for k in names}
        print("%d MiB reads of %s (%d MiB) into %s, %d rounds: GB/s (daemon, client CPU-s/GB)"
              % (chunk >> 20, rel, size >> 20, "host memory" if host else "a CUDA tensor", a.rounds))
        for r in range(a.rounds):
            for k in names[r % len(names):] + names[:r % len(names)]:
                res[k].append(rate(rows[k]))
            print("  round %d: %s" % (r, ", ".join("%s %.2f (%.3f, %.3f)" % ((k,) + res[k][-1]) for k in names)))
        for name, c in (("ram lease", ram), ("staged", staged), ("read_into, leased ring", leased)):
            if name in rows and c is not None:
                print("  %s: bytes by path %s" % (name, ", ".join(
                    "%s %.1f GB" % (p, st["bytes"] / 1e9) for p, st in sorted(c.path_stats.items()))))
        for k in [n for n in names if n != base]:
            ratios = sorted(x[0] / b[0] for x, b in zip(res[k], res[base]))
            print("  %s / %s: %s, median %.2f" % (k, base, " ".join("%.2f" % x for x in ratios), ratios[len(ratios) // 2]))
        if leased is not None:
            leased.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
