"""read_into a host buffer from a shard held whole: the whole-shard file,
the leased ring extents and the batch path, interleaved in one run.

    /usr/bin/python3 gds/python/whole_bench.py --mount MNT --file REL --source FILE --daemon-pid PID \
        [--rounds 5] [--staging 64M] [--chunk 4M]

REL must be held whole by the mount's cache (`shardfs warm` before the
mount) and in its ring; mount with --memory-cache-size 0 so that every path
reads the disk (the ring and the whole file are read with O_DIRECT, so the
page cache serves none of them). Each round reads all of REL once per path,
in an order rotated every round. Every path's bytes are compared with FILE
first. Prints a ROW line per read and a summary: MB/s, and CPU-seconds per
GB of this process (the client) and of the daemon (/proc/PID/stat).
"""

import argparse
import os
import resource
import statistics
import sys
import time

import numpy as np

import shardfs.gpu as gds



def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def daemon_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def own_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def clients(mount, staging, chunk, readers):
    """A client per row, each made to take only its path: {label: (client,
    the path read_into must report)}. readers: (preads in flight, chunk)
    of each whole-file row."""
    out = {}
    for r, rsize in readers:
        c = gds.Client(mount, buffer_size=staging, chunk_size=chunk)
        c._whole.readers = r
        if rsize:
            c._whole.pread_size = rsize
        size = min(c._whole.pread_size, max(staging // r, chunk), staging)  # as WholeFiles.read cuts it
        out["whole-file pread, %d reader%s, %d MiB preads" % (r, "s" if r > 1 else "", size >> 20)] = (
            c, "whole-file pread")
    out["lease"] = (gds.Client(mount, buffer_size=staging, chunk_size=chunk, whole_files=False), "lease")
    batch = gds.Client(mount, buffer_size=staging, chunk_size=chunk, whole_files=False)
    batch._ring.refused = True  # as when the ring file cannot be opened: READs in a batch
    out["batch"] = (batch, "batch")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mount", required=True)
    ap.add_argument("--file", required=True, help="the shard, relative to the mount")
    ap.add_argument("--source", required=True, help="the same bytes outside the mount")
    ap.add_argument("--daemon-pid", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--staging", type=size_arg, default=64 << 20)
    ap.add_argument("--chunk", type=size_arg, default=4 << 20)
    ap.add_argument("--readers", default="4,1",
                    help="whole-file rows: preads in flight, one row each (R@SIZE: preads of at most SIZE)")
    a = ap.parse_args()

    size = os.path.getsize(a.source)
    want = np.fromfile(a.source, np.uint8)
    out = np.empty(size, np.uint8)
    rows = [(r.partition("@")[0], r.partition("@")[2]) for r in a.readers.split(",")]
    cs = clients(a.mount, a.staging, a.chunk, [(int(r), size_arg(c) if c else 0) for r, c in rows])
    for name, (c, path) in cs.items():
        out.fill(0)
        n = c.read_into(out, a.file, 0, size)
        if n != size or c.last_path != path or not np.array_equal(out, want):
            sys.exit("%s: %d of %d bytes, path %s, bytes equal: %s" % (name, n, size, c.last_path,
                                                                       np.array_equal(out[:n], want[:n])))
    del want
    print("file %s, %d bytes; staging %d, chunk %d; every path's bytes equal the source" % (a.file, size, a.staging,
                                                                                            a.chunk))
    labels = list(cs)
    rows = {p: [] for p in labels}
    for r in range(a.rounds):
        order = labels[r % len(labels):] + labels[:r % len(labels)]
        for name in order:
            c, path = cs[name]
            d0, c0, t0 = daemon_cpu(a.daemon_pid), own_cpu(), time.perf_counter()
            n = c.read_into(out, a.file, 0, size)
            t = time.perf_counter() - t0
            dc, cc = daemon_cpu(a.daemon_pid) - d0, own_cpu() - c0
            if n != size or c.last_path != path:
                sys.exit("round %d %s: %d bytes, path %s" % (r, name, n, c.last_path))
            gb = n / 1e9
            rows[name].append((n / 1e6 / t, cc / gb, dc / gb))
            print("ROW round=%d path=%r MB/s=%.0f client_cpu_s_per_GB=%.3f daemon_cpu_s_per_GB=%.3f"
                  % (r, name, n / 1e6 / t, cc / gb, dc / gb), flush=True)
    for c, _ in cs.values():
        c.close()

    def spread(xs, fmt):
        return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(xs), min(xs), max(xs))

    print("\n| path | MB/s median (min-max) | client CPU-s/GB | daemon CPU-s/GB | total CPU-s/GB |")
    print("|---|---|---|---|---|")
    for name in labels:
        mb = [x[0] for x in rows[name]]
        cl = [x[1] for x in rows[name]]
        dm = [x[2] for x in rows[name]]
        tot = [x[1] + x[2] for x in rows[name]]
        print("| %s | %s | %s | %s | %s |" % (name, spread(mb, "%.0f"), spread(cl, "%.3f"), spread(dm, "%.3f"),
                                              spread(tot, "%.3f")))
    print("\nper-round ratios of MB/s (median, min-max over %d rounds):" % a.rounds)
    for other in labels[1:]:
        ratios = [w[0] / o[0] for w, o in zip(rows[labels[0]], rows[other])]
        print("  %s / %s: %s" % (labels[0], other, spread(ratios, "%.2fx")))


if __name__ == "__main__":
    main()
