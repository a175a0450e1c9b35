"""Throughput checks of the side interface.

    /usr/bin/python3 gds/python/gpu_bench.py --mount MNT [--file REL] [--chunk 8M] [--seconds 3]

Host section (any machine): 8 MiB staged READs into a registered buffer
against read(2) through the mount (page cache hot, and with the file's page
cache dropped so every read crosses FUSE), against a plain memcpy of the
same bytes already in memory (the ceiling of a copy out of the cache) and,
with a cache ring, against this process reading the leased ring extents
itself with O_DIRECT (the ceiling of a read from the disk).

GPU section (CUDA only): host-to-device throughput of the staged path
(read_into a CUDA tensor: READ + cudaHostRegister'd buffer + non-blocking
copy) and, where the mount's RAM tier is shared, of read_into by DMA out of
the tier (LEASE_FROM_RAM), against a plain torch pinned-memory copy, and the direct path
(LEASE + kvikio or libcufile) wherever cuFile loads, with the mode it runs
in; for a shard the cache holds whole (warmed before the mount), read_into
from the whole-shard file with cuFile and with O_DIRECT preads + copies,
against the staged path. Every path's bytes on the GPU are compared with the
file first. Without CUDA it says so and exits 0.
"""

import argparse
import os
import sys
import time

import numpy as np

import shardfs.gpu as gds


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def pick_file(mount):
    best = None
    for dirpath, dirnames, names in os.walk(mount):
        dirnames[:] = [d for d in dirnames if d != ".shardfs"]
        for n in names:
            p = os.path.join(dirpath, n)
            s = os.path.getsize(p)
            if best is None or s > best[1]:
                best = (os.path.relpath(p, mount), s)
    return best


def rate(fn, chunk, seconds, sync=None):
    """Bytes per second of fn(i) called repeatedly for about seconds."""
    fn(0)  # warm
    if sync:
        sync()
    n, t0 = 0, time.perf_counter()
    while True:
        fn(n)
        n += 1
        if n % 8 == 0 and time.perf_counter() - t0 >= seconds:
            break
    if sync:
        sync()
    return n * chunk / (time.perf_counter() - t0)


def report(name, bps, base=None):
    extra = "" if base is None else "  (%.2fx %s)" % (bps / base[1], base[0])
    print("  %-44s %8.2f GB/s%s" % (name, bps / 1e9, extra))


def ring_reader(client, rel, chunk):
    """fn(offset): this process reading the ring itself, O_DIRECT, through a
    LEASE of chunk bytes: what the disk gives without the daemon's copy."""
    import mmap

    align = client.capabilities()["alignment"]
    buf = mmap.mmap(-1, chunk + align)  # page-aligned, as O_DIRECT wants
    view = memoryview(buf)
    fds = {}

    def read(offset):
        # One LEASE covers at most max_lease_bytes: lease again until the
        # whole chunk is read, or the row would count bytes it never read.
        done = 0
        while done < chunk:
            with client.lease(rel, offset + done, chunk - done) as lease:
                if lease.covered == 0:
                    raise SystemExit("LEASE at %d covered nothing" % (offset + done))
                for e in lease.extents:
                    fd = fds.get(e.path)
                    if fd is None:
                        fd = fds[e.path] = os.open(e.path, os.O_RDONLY | os.O_DIRECT)
                    at = e.file_offset - offset
                    n = -(-e.length // align) * align  # whole sectors; the tail is padding
                    os.preadv(fd, [view[at:at + n]], e.cache_offset)
                done += lease.covered

    return read


def daemon_cpu_seconds(mount):
    """utime+stime of the mount's daemon, from /proc (pid from its stats)."""
    import json

    with open(os.path.join(mount, ".shardfs", "stats")) as f:
        pid = next(int(m["value"]) for m in json.load(f) if m["name"] == "shardfs_daemon_pid")
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def batch_rows(client, mount, rel, size, seconds, inflight=64, req=1 << 20):
    """1 MiB READs from the RAM tier: one synchronous READ at a time against
    64 in flight through one SUBMIT each round; bytes per second and the
    daemon's CPU-seconds per GB."""
    buf = client.register_buffer(inflight * req)
    q = client.queue()
    offsets = list(range(0, size - req + 1, req))
    for o in offsets[:max(1, (1 << 30) // req)]:  # settle: the RAM tier holds them
        client.read(rel, o, req, buf)

    def sync_round(i):
        for k in range(inflight):
            client.read(rel, offsets[(i * inflight + k) % len(offsets)], req, buf, k * req)

    def batch_round(i):
        reqs = [(rel, offsets[(i * inflight + k) % len(offsets)], req, buf, k * req, k) for k in range(inflight)]
        q.submit(reqs, wait=True)
        for _, _, res in q.reap():
            if res != req:
                raise SystemExit("batched READ: %d of %d bytes" % (res, req))

    out = {}
    for name, fn in (("synchronous READ, 1 MiB at a time", sync_round),
                     ("batched READs, %d x 1 MiB in flight" % inflight, batch_round)):
        c0 = daemon_cpu_seconds(mount)
        t0 = time.perf_counter()
        bps = rate(fn, inflight * req, seconds)
        gb = bps * (time.perf_counter() - t0) / 1e9
        out[name] = (bps, (daemon_cpu_seconds(mount) - c0) / gb)
    base = None
    for name, (bps, cpu) in out.items():
        report(name, bps, base)
        print("  %-44s %8.3f CPU-s/GB (daemon)" % ("", cpu))
        base = base or ("synchronous", bps)
    buf.unregister()


def host_section(client, mount, rel, size, chunk, seconds):
    offsets = list(range(0, size - chunk + 1, chunk)) or [0]
    chunk = min(chunk, size)
    path = os.path.join(mount, rel)
    with open(path, "rb") as f:  # warm the cache with the whole file
        while f.read(8 << 20):
            pass
    buf = client.register_buffer(chunk)
    print("host, %s, %d MiB chunks over %d MiB:" % (rel, chunk >> 20, size >> 20))

    def staged(i):
        client.read(rel, offsets[i % len(offsets)], chunk, buf)

    src = np.empty(size, np.uint8)
    with open(path, "rb") as f:
        f.readinto(src)
    dst = np.empty(chunk, np.uint8)

    def memcpy(i):
        o = offsets[i % len(offsets)]
        np.copyto(dst, src[o:o + chunk])

    fd = os.open(path, os.O_RDONLY)
    rbuf = bytearray(chunk)

    def pread(i):
        os.preadv(fd, [rbuf], offsets[i % len(offsets)])

    def pread_fuse(i):
        # Drop the file's page cache first so the bytes come through FUSE.
        o = offsets[i % len(offsets)]
        os.posix_fadvise(fd, o, chunk, os.POSIX_FADV_DONTNEED)
        os.preadv(fd, [rbuf], o)

    for i in range(len(offsets)):  # settle the cache tiers before timing
        staged(i)
    m = rate(memcpy, chunk, seconds)
    report("memcpy of bytes in memory", m)
    report("staged READ into registered buffer", rate(staged, chunk, seconds), ("memcpy", m))
    if client.capabilities().get("leases"):
        ring = ring_reader(client, rel, chunk)
        report("O_DIRECT pread of the leased ring extents", rate(lambda i: ring(offsets[i % len(offsets)]), chunk, seconds),
               ("memcpy", m))
    report("read(2), kernel page cache hot", rate(pread, chunk, seconds), ("memcpy", m))
    report("read(2) through FUSE (page cache dropped)", rate(pread_fuse, chunk, seconds), ("memcpy", m))
    os.close(fd)
    buf.unregister()
    if client.batch_available():
        batch_rows(client, mount, rel, size, seconds)


def gpu_section(client, mount, rel, size, chunk, seconds):
    import torch

    chunk = min(chunk, size, client.staging.size)
    offsets = list(range(0, size - chunk + 1, chunk)) or [0]
    dev = torch.empty(chunk, dtype=torch.uint8, device="cuda")
    pinned = torch.empty(chunk, dtype=torch.uint8).pin_memory()
    sync = torch.cuda.synchronize
    print("gpu %s, %d MiB chunks:" % (torch.cuda.get_device_name(0), chunk >> 20))
    with open(os.path.join(mount, rel), "rb") as f:
        want = [torch.frombuffer(bytearray(os.pread(f.fileno(), chunk, o)), dtype=torch.uint8).cuda()
                for o in offsets[:4]]

    def verify(name, read):
        for i, w in enumerate(want):
            dev.zero_()
            read(i)
            sync()
            if not torch.equal(dev, w):
                raise SystemExit("%s: bytes on the GPU differ from the file at offset %d" % (name, offsets[i]))

    def plain(i):
        dev.copy_(pinned, non_blocking=True)

    def staged(i):
        client._read_staged(dev, rel, offsets[i % len(offsets)], chunk)

    def pipelined(i):
        client.read_into(dev, rel, offsets[i % len(offsets)], chunk)

    verify("staged read_into", staged)
    p = rate(plain, chunk, seconds, sync)
    report("torch pinned H2D copy", p)
    report("staged read_into CUDA tensor, one READ at a time", rate(staged, chunk, seconds, sync), ("pinned copy", p))
    if client.ram_leases_available():
        verify("read_into from the shared RAM tier", pipelined)
        if client.last_path == "ram lease":
            report("read_into CUDA tensor, DMA out of the shared RAM tier", rate(pipelined, chunk, seconds, sync),
                   ("pinned copy", p))
        else:
            print("  shared RAM tier: not used (the tier does not hold the file; path %s)" % client.last_path)
    else:
        print("  shared RAM tier: off (mount --memory-cache-shared on)")
    if client.batch_available():
        ram, client._ram_direct = client._ram_direct, False
        verify("pipelined read_into", pipelined)
        report("pipelined read_into CUDA tensor (%d MiB chunks)" % (client.chunk_size >> 20),
               rate(pipelined, chunk, seconds, sync), ("pinned copy", p))
        client._ram_direct = ram
    staging = torch.from_numpy(client.staging.array[:chunk])  # cudaHostRegister'd by the reads above

    def staging_copy(i):
        dev.copy_(staging, non_blocking=True)

    report("H2D copy out of the staging buffer alone", rate(staging_copy, chunk, seconds, sync), ("pinned copy", p))
    # The direct path alone: no whole files, no RAM tier; a read that cuFile
    # refuses falls back to a staged path, which last_path then names.
    with gds.Client(mount, direct=True, whole_files=False, ram_direct=False) as direct_client:
        mode = direct_client.direct_mode()
        if mode is None:
            print("  direct path: not available (no kvikio or libcufile, or no cache ring)")
            return

        def direct(i):
            direct_client.read_into(dev, rel, offsets[i % len(offsets)], chunk)

        verify("direct LEASE + cuFile", direct)
        if direct_client.last_path != "lease cufile":
            print("  direct path: %s loaded, but cuFile refused the ring (read by %s)" % (mode, direct_client.last_path))
            return
        report("direct LEASE + cuFile", rate(direct, chunk, seconds, sync), ("pinned copy", p))
        print("  direct path: %s" % mode)


def whole_file_rows(mount, rel, chunk, seconds, staging, pipeline_chunk):
    """read_into a CUDA tensor from the shard's whole-shard file: with cuFile
    (whatever mode it loads in) and with O_DIRECT preads + copies, against
    the staged path of the same client settings with whole files off."""
    import torch

    with gds.Client(mount, buffer_size=0) as c:
        try:
            c.whole_file(rel)
        except OSError as e:
            print("  whole-file rows: %s is not held whole (%s); warm it before the mount" % (rel, e.strerror))
            return
    size = os.path.getsize(os.path.join(mount, rel))
    chunk = min(chunk, size)
    offsets = list(range(0, size - chunk + 1, chunk)) or [0]
    dev = torch.empty(chunk, dtype=torch.uint8, device="cuda")
    with open(os.path.join(mount, rel), "rb") as f:
        want = torch.frombuffer(bytearray(os.pread(f.fileno(), chunk, offsets[1 % len(offsets)])),
                                dtype=torch.uint8).cuda()
    sync = torch.cuda.synchronize
    rows = []
    for name, opts in (("staged read_into (whole files off)", {"whole_files": False}),
                       ("whole-file read_into, cuFile", {}),
                       ("whole-file read_into, O_DIRECT pread + copy", {"cufile": False})):
        with gds.Client(mount, buffer_size=staging, chunk_size=pipeline_chunk, ram_direct=False, **opts) as c:
            dev.zero_()
            c.read_into(dev, rel, offsets[1 % len(offsets)], chunk)
            sync()
            if not torch.equal(dev, want):
                raise SystemExit("%s: bytes on the GPU differ from the file" % name)
            if opts == {} and c.last_path != "whole-file cufile":
                print("  whole-file read_into, cuFile: not used (%s), path %s" % (c.whole_file_mode(), c.last_path))
                continue
            bps = rate(lambda i: c.read_into(dev, rel, offsets[i % len(offsets)], chunk), chunk, seconds, sync)
            rows.append((name, bps, c.last_path, c.whole_file_mode()))
    base = None
    for name, bps, path, mode in rows:
        report(name, bps, base)
        print("  %-44s path %s%s" % ("", path, ", cuFile " + mode if path == "whole-file cufile" else ""))
        base = base or ("staged", bps)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mount", required=True)
    ap.add_argument("--file", help="shard to read, relative to the mount (default: the largest)")
    ap.add_argument("--chunk", type=size_arg, default=8 << 20)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--pipeline-chunk", type=size_arg, default=4 << 20, help="chunk of a pipelined read_into")
    ap.add_argument("--staging", type=size_arg, default=0, help="staging buffer (default: 2 x --chunk)")
    a = ap.parse_args()

    rel, size = (a.file, os.path.getsize(os.path.join(a.mount, a.file))) if a.file else pick_file(a.mount)
    # whole_files=False: the rows below measure the staged and leased paths
    # even for a shard the cache holds whole (whole_file_rows has its own).
    with gds.Client(a.mount, buffer_size=a.staging or 2 * a.chunk, chunk_size=a.pipeline_chunk,
                    whole_files=False) as client:
        caps = client.capabilities()
        print("shardfs ABI %d, leases %s, GPUs seen by the daemon: %d" % (caps["abi_version"], caps["leases"], len(caps["gpus"])))
        host_section(client, a.mount, rel, size, a.chunk, a.seconds)
        try:
            import torch
            cuda = torch.cuda.is_available()
        except ImportError:
            cuda = False
        if not cuda:
            print("no CUDA device (or no torch with CUDA): GPU checks skipped")
            return 0
        gpu_section(client, a.mount, rel, size, a.chunk, a.seconds)
    whole_file_rows(a.mount, rel, a.chunk, a.seconds, a.staging or 2 * a.chunk, a.pipeline_chunk)
    return 0


if __name__ == "__main__":
    sys.exit(main())
