"""Tests of the GPU side interface through a real shardfs mount (no GPU).

    python3 python/tests/integration/test_client.py --mount MNT --source DIR [--whole REL --cold REL]

DIR holds the same files as the mount. --whole names a shard the mount's
cache holds as a whole-shard file (`shardfs warm` before the mount), --cold
one it does not; without them the whole-file checks are skipped. Prints each check, then
"N passed, N failed" (and "N skipped" when some could not run); exits
non-zero when any check failed.
"""

import argparse
import errno
import os
import sys
import tempfile
import traceback

import numpy as np

import shardfs.gpu as gds
from shardfs.gpu import abi, batch, cufile, wholefile
from shardfs.gpu import lease as lease_path
from shardfs.gpu.ctl import Buffer, Lease, ioctl
from shardfs.gpu.engines import HostCopyEngine

RESULTS = {"passed": 0, "failed": 0, "skipped": 0}
# read_into's paths other than a whole-shard file: the shared RAM tier
# (once earlier reads put the bytes there), ring leases, batched READs,
# one READ at a time.
OTHER_PATHS = ("ram lease", "lease", "batch", "read")


def check(name):
    def wrap(fn):
        def run(*args):
            try:
                fn(*args)
            except Skip as s:
                RESULTS["skipped"] += 1
                print("SKIP", name, "-", s)
                return
            except Exception:
                RESULTS["failed"] += 1
                print("FAIL", name)
                traceback.print_exc()
                return
            RESULTS["passed"] += 1
            print("ok  ", name)
        return run
    return wrap


class Skip(Exception):
    pass


def expect_errno(want, fn, *args):
    try:
        fn(*args)
    except OSError as e:
        if e.errno != want:
            raise AssertionError("errno %s, want %s" % (errno.errorcode.get(e.errno), errno.errorcode[want]))
        return
    raise AssertionError("no error, want %s" % errno.errorcode[want])


class Suite:
    def __init__(self, mount, source, whole=None, cold=None):
        self.mount, self.source = mount, source
        self.whole, self.cold = whole, cold
        files = []
        for dirpath, _, names in os.walk(source):
            for n in names:
                p = os.path.join(dirpath, n)
                if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) > 0:
                    files.append(os.path.relpath(p, source))
        if not files:
            raise SystemExit("no non-empty files under %s" % source)
        files.sort(key=lambda f: os.path.getsize(os.path.join(source, f)), reverse=True)
        self.files = files[:3]
        self.big = self.files[0]
        self.client = gds.Client(mount, buffer_size=4 << 20)

    def data(self, rel):
        with open(os.path.join(self.source, rel), "rb") as f:
            return f.read()

    @check("capabilities: ABI, command numbers, GPU list")
    def capabilities(self):
        caps = self.client.capabilities()
        assert caps["abi_version"] == gds.ABI_VERSION, caps
        want = abi.COMMANDS
        assert caps["commands"] == want, (caps["commands"], want)
        assert isinstance(caps["gpus"], list) and caps["block_size"] > 0, caps

    @check("READ into a registered buffer equals the file, many offsets")
    def read_bytes(self):
        buf = self.client.staging
        for rel in self.files:
            data = self.data(rel)
            size = len(data)
            for off in sorted(o for o in {0, 1, 4095, size // 3, size // 2 + 7, size - 1, size} if o <= size):
                for length in (1, 4096, (1 << 20) + 3, buf.size):
                    for buf_off in (0, 5):
                        length = min(length, buf.size - buf_off)
                        n = self.client.read(rel, off, length, buf, buf_off)
                        want = data[off:off + length]
                        assert n == len(want), (rel, off, length, n, len(want))
                        got = bytes(buf.array[buf_off:buf_off + n])
                        assert got == want, (rel, off, length, buf_off)

    @check("READ on a shard's own fd (buffer registered on it) and by absolute path")
    def read_fd(self):
        data = self.data(self.big)
        fd = os.open(os.path.join(self.mount, self.big), os.O_RDONLY)
        try:
            buf = self.client.register_buffer(1 << 20, fd=fd)
            n = self.client.read(fd, 100, 10000, buf)
            assert n == 10000 and bytes(buf.array[:n]) == data[100:10100]
            # The ctl file's buffer belongs to another handle.
            expect_errno(errno.EBADF, self.client.read, fd, 0, 1, self.client.staging)
        finally:
            os.close(fd)
        n = self.client.read(os.path.join(self.mount, self.big), 7, 100)
        assert bytes(self.client.staging.array[:n]) == data[7:107]

    @check("read_into numpy array (several staging rounds) and torch CPU tensor")
    def read_into(self):
        data = self.data(self.big)
        length = min(len(data) - 3, 3 * self.client.staging.size + 12345)
        arr = np.zeros(length, np.uint8)
        n = self.client.read_into(arr, self.big, 3, length)
        assert n == length and arr.tobytes() == data[3:3 + length]
        try:
            import torch
        except ImportError:
            raise Skip("torch not installed")
        t = torch.zeros(1000, dtype=torch.float32)  # 4000 bytes through a float view
        n = self.client.read_into(t, self.big, 0, 4000)
        assert n == 4000 and t.numpy().tobytes() == data[:4000]

    @check("READ errors: out-of-range offset and buffer range (ERANGE), unknown path (ENOENT)")
    def read_range_errors(self):
        size = len(self.data(self.big))
        buf = self.client.staging
        expect_errno(errno.ERANGE, self.client.read, self.big, size + 1, 1)
        expect_errno(errno.ERANGE, self.client.read, self.big, 1 << 62, 1)
        expect_errno(errno.ERANGE, self.client.read, self.big, 0, buf.size + 1)
        expect_errno(errno.ERANGE, self.client.read, self.big, 0, 10, buf, buf.size - 5)
        expect_errno(errno.ENOENT, self.client.read, "no/such/file.tar", 0, 1)

    @check("READ into unknown, unregistered and another handle's buffers (EBADF)")
    def buffer_errors(self):
        bogus = Buffer(self.client.ctl, 987654321, 4096, bytearray(4096))
        expect_errno(errno.EBADF, self.client.read, self.big, 0, 1, bogus)
        extra = self.client.register_buffer(4096)
        assert self.client.read(self.big, 0, 10, extra) == 10
        stale_id = extra.id
        extra.unregister()
        expect_errno(errno.EBADF, self.client.read, self.big, 0, 1, Buffer(self.client.ctl, stale_id, 4096, bytearray(4096)))
        with gds.Client(self.mount, buffer_size=0) as other:
            theirs = Buffer(other.ctl, self.client.staging.id, 4096, bytearray(4096))
            expect_errno(errno.EBADF, other.read, self.big, 0, 1, theirs)

    def shm(self, mode=0o600, size=4096):
        fd, path = tempfile.mkstemp(prefix="shardfs-test-", dir="/dev/shm")
        os.ftruncate(fd, size)
        os.fchmod(fd, mode)
        os.close(fd)
        self._cleanup.append(path)
        return path

    @check("REGISTER errors: symlink (ELOOP), mode (EPERM), too small (ERANGE), bad names (EINVAL), missing (ENOENT)")
    def register_errors(self):
        self._cleanup = []
        try:
            target = self.shm()
            link = target + "-link"
            os.symlink(target, link)
            self._cleanup.append(link)
            expect_errno(errno.ELOOP, self.client.register_shm, os.path.basename(link), 4096)
            expect_errno(errno.EPERM, self.client.register_shm, os.path.basename(self.shm(0o644)), 4096)
            expect_errno(errno.EPERM, self.client.register_shm, os.path.basename(self.shm(0o666)), 4096)
            expect_errno(errno.ERANGE, self.client.register_shm, os.path.basename(target), 8192)
            expect_errno(errno.EINVAL, self.client.register_shm, "../" + os.path.basename(target), 4096)
            expect_errno(errno.EINVAL, self.client.register_shm, "a/b", 4096)
            expect_errno(errno.EINVAL, self.client.register_shm, "..", 4096)
            expect_errno(errno.EINVAL, self.client.register_shm, os.path.basename(target), 0)
            expect_errno(errno.ENOENT, self.client.register_shm, "shardfs-test-none-" + os.urandom(4).hex(), 4096)
        finally:
            for p in self._cleanup:
                os.unlink(p)

    @check("REGISTER of another uid's buffer (EPERM)")
    def other_uid(self):
        if os.geteuid() != 0:
            raise Skip("needs root to chown the shm file")
        self._cleanup = []
        try:
            path = self.shm()
            os.chown(path, 65534, 65534)
            expect_errno(errno.EPERM, self.client.register_shm, os.path.basename(path), 4096)
        finally:
            for p in self._cleanup:
                os.unlink(p)

    @check("malformed requests: ABI version (EPROTO), unknown command (ENOTTY)")
    def malformed(self):
        req = abi.READ_REQ.pack(abi.ABI_VERSION + 1, 0, 0, 1, self.client.staging.id, 0, 0, self.big.encode())
        expect_errno(errno.EPROTO, ioctl, self.client.ctl_fd, abi.READ, req)
        expect_errno(errno.ENOTTY, ioctl, self.client.ctl_fd, abi.ioc(3, 60, 16), bytes(16))

    @check("the daemon still serves after the errors")
    def still_serves(self):
        data = self.data(self.big)
        n = self.client.read(self.big, 12345, 100000)
        assert bytes(self.client.staging.array[:n]) == data[12345:12345 + n] and n == min(100000, len(data) - 12345)
        with open(os.path.join(self.mount, self.big), "rb") as f:
            assert f.read(4096) == data[:4096]

    @check("LEASE extents read directly from the cache files equal the file")
    def lease(self):
        if not self.client.capabilities()["leases"]:
            expect_errno(errno.EOPNOTSUPP, self.client.lease, self.big, 0, 1)
            raise Skip("mount has no cache ring: LEASE answers EOPNOTSUPP (checked)")
        data = self.data(self.big)
        off = min(4097, len(data) - 1)
        length = min(len(data) - off, 3 << 20)
        with self.client.lease(self.big, off, length) as lease:
            assert 0 < lease.covered <= length and lease.extents, lease.extents
            got = bytearray()
            pos = off
            for e in lease.extents:
                assert e.file_offset == pos, lease.extents
                with open(e.path, "rb") as f:
                    f.seek(e.cache_offset)
                    got += f.read(e.length)
                pos += e.length
            assert bytes(got) == data[off:off + lease.covered]
            lease_id = lease.id
        stale = Lease(self.client.ctl, lease_id, 0, [])
        expect_errno(errno.ENOENT, stale.drop)
        expect_errno(errno.ERANGE, self.client.lease, self.big, len(data), 1)

    @check("direct path: chosen only with real GDS; a missing libcufile is a clean ENOENT")
    def direct_choice(self):
        try:
            import kvikio  # noqa: F401
            has_kvikio = True
        except ImportError:
            has_kvikio = False
        with gds.Client(self.mount, buffer_size=0) as c:
            mode = c.direct_mode()
            if not has_kvikio and not cufile.nvfs_loaded():
                assert mode is None, "direct path %r chosen without nvidia-fs or kvikio" % mode
        with gds.Client(self.mount, buffer_size=0, direct=False) as c:
            assert c.direct_mode() is None
        try:
            cufile.CuFile(candidates=[os.path.join(self.source, "no-such-libcufile.so")])
        except OSError as e:
            assert e.errno == errno.ENOENT and "no-such-libcufile.so" in str(e), e
        else:
            raise AssertionError("a missing libcufile loaded")

    def ranges(self, rng, n, size, max_len):
        """n (offset, length) pairs inside a file of size bytes."""
        out = []
        for _ in range(n):
            off = int(rng.integers(0, size))
            out.append((off, int(rng.integers(1, max(2, min(max_len, size - off) + 1)))))
        return out

    @check("batch: one SUBMIT of many entries, completed in the queue, every byte equals the file")
    def batch_bytes(self):
        q = self.client.queue()
        rng = np.random.default_rng(7)
        buf = self.client.register_buffer(16 << 20)
        reqs, wants, at = [], [], 0
        for rel in self.files:
            data = self.data(rel)
            for off, n in self.ranges(rng, 40, len(data), 300_000) + [(0, len(data)), (len(data) - 1, 10)]:
                n = min(n, buf.size - at, len(data) - off)
                if n <= 0:
                    continue
                reqs.append((rel, off, n, buf, at, len(reqs)))
                wants.append((at, data[off:off + n]))
                at += n
        for start in range(0, len(reqs), 100):
            q.submit(reqs[start:start + 100], wait=True)
        got = {u: r for _, u, r in q.reap()}
        assert len(got) == len(reqs), (len(got), len(reqs))
        for i, (at, want) in enumerate(wants):
            assert got[i] == len(want), (i, got[i], len(want))
            assert bytes(buf.array[at:at + len(want)]) == want, i
        buf.unregister()

    @check("batch: SUBMIT returns at once, WAIT and the state words report every completion")
    def batch_async(self):
        q = self.client.queue()
        data = self.data(self.big)
        buf = self.client.register_buffer(8 << 20)
        chunk = 256 << 10
        reqs = [(self.big, (i * chunk) % (len(data) - chunk), chunk, buf, i * chunk, i) for i in range(32)]
        q.submit(reqs)
        seen = {}
        deadline = 200
        while len(seen) < len(reqs) and deadline:
            for _, u, r in q.reap():
                seen[u] = r
            if len(seen) < len(reqs):
                q.wait(100)
                deadline -= 1
        assert len(seen) == len(reqs), "%d of %d completions" % (len(seen), len(reqs))
        for _, off, n, _, at, u in reqs:
            assert seen[u] == n and bytes(buf.array[at:at + n]) == data[off:off + n], u
        buf.unregister()

    @check("batch: entry errors (another handle's buffer, unknown path, past the end) and SUBMIT bounds")
    def batch_errors(self):
        q = self.client.queue()
        size = len(self.data(self.big))
        with gds.Client(self.mount, buffer_size=1 << 20) as other:
            buf = self.client.register_buffer(1 << 20)
            slots = q.submit([(self.big, 0, 10, other.staging, 0, 1), ("no/such.tar", 0, 10, buf, 0, 2),
                              (self.big, size + 1, 10, buf, 0, 3), (self.big, 0, 10, buf, (1 << 20) - 5, 4)], wait=True)
            assert len(slots) == 4
            got = {u: r for _, u, r in q.reap()}
            want = {1: -errno.EBADF, 2: -errno.ENOENT, 3: -errno.ERANGE, 4: -errno.ERANGE}
            assert got == want, (got, want)
            assert not other.staging.array[:10].any(), "another handle's buffer was written"
            buf.unregister()
        max_batch = self.client.capabilities()["batch"]["max_batch"]
        big = batch.Queue(self.client.ctl, entries=max_batch + 1)
        expect_errno(errno.E2BIG, big.submit, [(self.big, 0, 1, self.client.staging, 0, i) for i in range(max_batch + 1)])
        big.close()
        expect_errno(errno.EAGAIN, q.submit, [(self.big, 0, 1, self.client.staging, 0, i) for i in range(q.n + 1)])

    @check("batch: a client that exits with entries in flight leaves nothing behind")
    def batch_client_dies(self):
        import json
        import subprocess

        code = ("import os, shardfs\n"
                "c = shardfs.Client(%r, buffer_size=64 << 20)\n"
                "q = c.queue()\n"
                "q.submit([(%r, 0, 1 << 20, c.staging, i << 20, i) for i in range(64)])\n"
                "os._exit(0)\n" % (self.mount, self.big))
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)

        def in_flight():
            with open(os.path.join(self.mount, ".shardfs", "stats")) as f:
                return next((m["value"] for m in json.load(f) if m["name"] == "shardfs_gds_batch_in_flight"), None)

        # The entries' reads finish (or fail) on the daemon's own time once
        # their handle is gone: wait for the count to reach 0, with a bound
        # that only a hang reaches.
        import time

        deadline = time.monotonic() + 120
        while in_flight() != 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert in_flight() == 0, "batch entries still in flight 120 s after the client died: %s" % in_flight()
        self.still_serves()

    @check("pipelined read_into: chunks copied as they land, a slot reused only after its copy, bytes right")
    def pipeline(self):
        class FakeEngine(HostCopyEngine):
            """Records the pipeline's calls; checks a slot is never refilled
            while its copy may still run."""

            def __init__(self):
                super().__init__(record=True)
                self.busy = set()
                self.reuses = 0

            def copy(self, out, at, src, slot):
                assert slot not in self.busy, "slot %d refilled before its copy finished" % slot
                self.busy.add(slot)
                super().copy(out, at, src, slot)

            def reuse(self, slot):
                self.reuses += slot in self.busy
                self.busy.discard(slot)

            def finish(self):
                self.busy.clear()

        with gds.Client(self.mount, buffer_size=256 << 10, chunk_size=64 << 10) as c:
            for rel in self.files:
                data = self.data(rel)
                for off, n in [(0, len(data)), (4096, len(data) - 4096), (1, len(data) - 1), (len(data) // 2, 100)]:
                    out = np.zeros(n, np.uint8)
                    eng = FakeEngine()
                    got = c._read_pipelined(out, rel, off, n, engine=eng)
                    assert got == n and out.tobytes() == data[off:off + n], (rel, off, n)
                    assert sum(k[1] for k in eng.copies) == n, (rel, off, n)
                    if n > 4 * (64 << 10):
                        assert eng.reuses > 0, "4 staging slots, %d chunks, no slot reused" % len(eng.copies)
            # Past the end: clipped to the file.
            data = self.data(self.big)
            n = 4 * (64 << 10)
            out = np.zeros(n, np.uint8)
            assert c.read_into(out, self.big, len(data) - 10, n) == 10 and out[:10].tobytes() == data[-10:]
            if c.capabilities()["leases"]:
                # Ring blocks read by this process from the ring file itself
                # (the daemon copies nothing), through the same slots. The
                # blocks are in the RAM tier by now, where read_into would
                # let the daemon copy them: leased all the same here.
                for off, n in [(1 << 20, 1 << 20), (0, len(data)), (4096, 300_000)]:
                    out = np.zeros(n, np.uint8)
                    eng = FakeEngine()
                    got = lease_path.read_leased(c.ctl, c._ring, c.staging, out, self.big, off, n, 64 << 10, eng,
                                                 unless_in_ram=False)
                    assert got == n and out.tobytes() == data[off:off + n], (off, n)
                assert c._ring._fds, "leased reads did not read the ring file"

    def need_whole(self):
        if not self.whole or not self.cold:
            raise Skip("no --whole and --cold shards given")

    @check("whole file: WHOLE_FILE names the warmed shard's own file (size, bytes), ENODATA for a cold one")
    def whole_file(self):
        self.need_whole()
        caps = self.client.capabilities()
        assert caps["whole_files"] is True and self.client.whole_files_available(), caps
        data = self.data(self.whole)
        file, size = self.client.whole_file(self.whole)
        assert size == len(data) and os.path.isabs(file), (file, size, len(data))
        with open(file, "rb") as f:
            assert f.read() == data, "%s does not hold %s" % (file, self.whole)
        fd = os.open(os.path.join(self.mount, self.whole), os.O_RDONLY)
        try:
            assert self.client.whole_file(fd) == (file, size), "on the shard's own fd"
        finally:
            os.close(fd)
        assert self.client.whole_file(os.path.join(self.mount, self.whole)) == (file, size), "by absolute path"
        expect_errno(errno.ENODATA, self.client.whole_file, self.cold)
        expect_errno(errno.ENOENT, self.client.whole_file, "no/such/shard.tar")

    # The whole-file checks read with ram_direct=False: what they read may
    # be in the shared RAM tier by then, which read_into would try first.
    @check("whole file: read_into a numpy array and a torch CPU tensor from the file itself, every byte, path reported")
    def whole_read_into(self):
        self.need_whole()
        data = self.data(self.whole)
        size = len(data)
        cases = [(0, size), (1, size - 1), (4095, 5 << 20), (4096, 300_000), (size // 2 + 3, 1 << 20), (size - 1, 10),
                 (size, 10)]
        small = {"buffer_size": 256 << 10, "chunk_size": 64 << 10}
        for opts, readers in (({}, 4), (small, 4), (small, 1)):
            with gds.Client(self.mount, ram_direct=False, **opts) as c:
                c._whole.readers = readers  # preads in flight; 1: one at a time, on this thread
                for off, n in cases:
                    out = np.full(n, 0xEE, np.uint8)
                    got = c.read_into(out, self.whole, off, n)
                    want = data[off:off + n]
                    assert got == len(want) and out[:got].tobytes() == want, (opts, off, n, got)
                    assert c.last_path == "whole-file pread", (opts, off, n, c.last_path)
                assert c.path_stats["whole-file pread"]["calls"] == len(cases), c.path_stats
                assert list(c._whole._open), "no whole-shard file was opened"
                assert (c._whole._pool is not None) == (readers > 1), (readers, c._whole._pool)
                expect_errno(errno.ERANGE, c.read_into, np.zeros(1, np.uint8), self.whole, size + 1, 1)
                cold = self.data(self.cold)
                c._whole.ABSENT_SECONDS = 600  # however slow this box is, the second read is inside it
                asked, real = [], c.ctl.whole_file
                c.ctl.whole_file = lambda p: (asked.append(p), real(p))[1]
                for _ in range(2):
                    out = np.zeros(len(cold), np.uint8)
                    assert c.read_into(out, self.cold, 0, len(cold)) == len(cold) and out.tobytes() == cold
                    assert c.last_path in OTHER_PATHS, c.last_path
                assert asked == [self.cold], "WHOLE_FILE asked %s, want once for the cold shard" % asked
        with gds.Client(self.mount, whole_files=False, ram_direct=False) as c:
            out = np.zeros(size, np.uint8)
            assert c.read_into(out, self.whole, 0, size) == size and out.tobytes() == data
            assert c.last_path in OTHER_PATHS, c.last_path
        try:
            import torch
        except ImportError:
            raise Skip("torch not installed")
        with gds.Client(self.mount, ram_direct=False) as c:
            t = torch.zeros((size - 5) // 4, dtype=torch.float32)
            n = c.read_into(t, self.whole, 5, t.numel() * 4)
            assert n == t.numel() * 4 and t.numpy().tobytes() == data[5:5 + n] and c.last_path == "whole-file pread"

    @check("whole file: cuFile engine chosen (fake kvikio, compatibility mode) or none (no libcufile); CUDA path with fake engines")
    def whole_cufile_engine(self):
        self.need_whole()
        import types

        saved = {k: sys.modules.get(k) for k in ("kvikio", "kvikio.defaults")}
        saved_env = os.environ.get("SHARDFS_CUFILE_LIB")
        reads = []

        class FakeCuFile:
            def __init__(self, path, mode):
                assert mode == "r"
                self.fd = os.open(path, os.O_RDONLY)
                self.path = path

            def pread(self, buf, size, file_offset):
                reads.append((self.path, size, file_offset))
                got = os.preadv(self.fd, [memoryview(buf)[:size]], file_offset)
                return types.SimpleNamespace(get=lambda: got)

            def close(self):
                os.close(self.fd)

        kvikio = types.ModuleType("kvikio")
        kvikio.CuFile = FakeCuFile
        kvikio.defaults = types.ModuleType("kvikio.defaults")
        kvikio.defaults.compat_mode = lambda: True
        try:
            os.environ["SHARDFS_CUFILE_LIB"] = os.path.join(self.source, "no-such-libcufile.so")
            sys.modules["kvikio"] = None  # import fails: no kvikio
            assert wholefile.choose_engine(None) is None, "an engine without kvikio or libcufile"
            with gds.Client(self.mount, buffer_size=0) as c:
                assert c.whole_file_mode() is None
            sys.modules["kvikio"], sys.modules["kvikio.defaults"] = kvikio, kvikio.defaults
            engine = wholefile.choose_engine(None)
            assert engine is not None and engine.mode() == "kvikio, compatibility mode", engine
            assert wholefile.choose_engine(False) is None
            assert cufile.kvikio_reader(None) is None, "leases read with cuFile in compatibility mode"
            data = self.data(self.whole)
            with gds.Client(self.mount, buffer_size=256 << 10, chunk_size=64 << 10) as c:
                assert c.whole_file_mode() == "kvikio, compatibility mode", c.whole_file_mode()
                copies = c._engines["cuda"] = HostCopyEngine(record=True)  # stands in for the CUDA stream
                for off, n in [(0, len(data)), (12345, 1 << 20)]:
                    out = np.zeros(n, np.uint8)
                    assert c._read_whole(out, self.whole, off, n, True) == n and out.tobytes() == data[off:off + n]
                    assert c.last_path == "whole-file cufile", c.last_path
                    assert reads[-1][1:] == (n, off), reads[-1]
                assert not copies.copies, "the cuFile path went through the staging buffer"
                file, _ = c.whole_file(self.whole)
                assert {r[0] for r in reads} == {file}, reads

                def refuse(path):
                    raise RuntimeError("cuFileHandleRegister: file descriptor is not registered")

                c._whole.engine = types.SimpleNamespace(open=refuse, mode=lambda: "refusing")
                c._whole.close()  # no cuFile handle kept from above
                out = np.zeros(len(data), np.uint8)
                assert c._read_whole(out, self.whole, 0, len(data), True) == len(data) and out.tobytes() == data
                assert c.last_path == "whole-file pread" and c._whole.engine is False, c.last_path
                assert sum(k[1] for k in copies.copies) == len(data), "staged copies do not cover the read"
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
            if saved_env is None:
                os.environ.pop("SHARDFS_CUFILE_LIB", None)
            else:
                os.environ["SHARDFS_CUFILE_LIB"] = saved_env

    def need_ram_leases(self, c):
        if not c.ram_leases_available():
            raise Skip("the mount's RAM tier is not shared (mount with --memory-cache-shared on)")

    def into_ram(self, c, rel, off, n):
        """READs [off, off+n) until the daemon's RAM tier holds it: READs of
        ring blocks fill the tier's free room (the first caches the blocks
        in the ring, unless the mount's own read-ahead of the shard, which
        caches in the ring alone, served it)."""
        import time

        # The ring writes of a read-ahead land on the daemon's own time:
        # READ again until the tier holds the range, with a bound that only
        # a hang reaches.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert c.read(rel, off, n) == n
            try:
                with c.lease(rel, off, n, gds.LEASE_FROM_RAM) as lease:
                    if lease.covered == n:  # a prefix of the range is not enough
                        return
            except OSError as e:
                if e.errno != errno.ENODATA:
                    raise
            time.sleep(0.05)
        raise AssertionError("%s [%d,+%d) not in the RAM tier after 120 s of READs" % (rel, off, n))

    @check("shared RAM tier: LEASE_FROM_RAM of a cold range is ENODATA; read_into copies leased blocks itself "
           "(numpy, torch CPU), every byte, and a range partly in the tier reads the rest another way")
    def ram_lease(self):
        data = self.data(self.big)
        mib = 1 << 20
        if len(data) < 6 * mib:
            raise AssertionError("%s: %d bytes, the check needs 6 MiB" % (self.big, len(data)))
        with gds.Client(self.mount, buffer_size=4 * mib) as c:
            self.need_ram_leases(c)
            expect_errno(errno.ENODATA, c.lease, self.big, mib, mib, gds.LEASE_FROM_RAM)
            self.into_ram(c, self.big, mib, 2 * mib)
            with c.lease(self.big, mib, 2 * mib, gds.LEASE_FROM_RAM) as lease:
                assert lease.covered == 2 * mib and len({e.path for e in lease.extents}) == 1, lease.extents
                for e in lease.extents:
                    assert os.path.dirname(e.path) == "/dev/shm", e.path
                    with open(e.path, "rb") as f:
                        f.seek(e.cache_offset)
                        assert f.read(e.length) == data[e.file_offset:e.file_offset + e.length], e
            # The tier holds [mib, 3 mib) at least (a cold READ may have put
            # more there): LEASE_FROM_RAM is made to refuse past 3 mib, as a
            # daemon whose tier holds no more would.
            real = c.ctl.lease

            def lease_to(path, offset, length, flags=0):
                if flags & gds.LEASE_FROM_RAM:
                    if offset >= 3 * mib:
                        raise OSError(errno.ENODATA, "past the range in the tier")
                    length = min(length, 3 * mib - offset)
                return real(path, offset, length, flags)

            c.ctl.lease = lease_to
            out = np.full(4 * mib, 0xEE, np.uint8)
            assert c.read_into(out, self.big, mib + 5, 4 * mib) == 4 * mib and out.tobytes() == data[mib + 5:5 * mib + 5]
            assert c.path_stats["ram lease"]["bytes"] == 2 * mib - 5, c.path_stats
            assert sum(v["bytes"] for k, v in c.path_stats.items() if k != "ram lease") == 2 * mib + 5, c.path_stats
            c.ctl.lease = real
            out = np.zeros(2 * mib - 7, np.uint8)
            assert c.read_into(out, self.big, mib + 7, 2 * mib - 7) == 2 * mib - 7 and out.tobytes() == data[mib + 7:3 * mib]
            assert c.last_path == "ram lease", c.last_path
            try:
                import torch
            except ImportError:
                return
            t = torch.zeros(mib // 4, dtype=torch.float32)
            assert c.read_into(t, self.big, 2 * mib, mib) == mib and t.numpy().tobytes() == data[2 * mib:3 * mib]
            assert c.last_path == "ram lease", c.last_path

    @check("shared RAM tier: the CUDA path with a fake copy engine: each lease held until its copies pass, "
           "at most MAX_HELD held, a sequential reader's window read with no LEASE, all dropped by drain")
    def ram_lease_async(self):
        data = self.data(self.big)
        mib = 1 << 20

        class FakeStream(HostCopyEngine):
            """Copies at once, but says a slot's copies are done only when told."""

            def __init__(self):
                super().__init__()
                self.passed, self.waited = set(), []

            def done(self, slot):
                return slot in self.passed

            def reuse(self, slot):
                self.waited.append(slot)
                self.passed.add(slot)

        class NoPins:
            """Stands in for CUDA's registration of the tier's mapping."""

            def pin(self, array, lo, hi):
                pass

            def unpin(self):
                pass

        with gds.Client(self.mount, buffer_size=4 * mib) as c:
            self.need_ram_leases(c)
            self.into_ram(c, self.big, mib, 2 * mib)
            fake = c._ram.engines["cuda"] = FakeStream()
            c._ram._pins = NoPins()
            c._ram.MAX_HELD = 2
            half = mib // 2
            # Backwards, so that each read leases its own range: the last
            # read's lease stays as the window, the others wait for their
            # copies.
            leases = []
            for i in reversed(range(4)):
                out = np.zeros(half, np.uint8)
                at = mib + i * half
                assert c._read_ram(out, self.big, at, half, True) == (half, True)
                assert out.tobytes() == data[at:at + half], i
                assert len(c._ram.held) <= c._ram.MAX_HELD, len(c._ram.held)
                leases.append(c._ram.window.lease)
            ids = [lease.id for lease in leases]
            assert fake.waited == leases[:1], "the oldest copy was waited for once MAX_HELD were held: %s" % fake.waited
            assert [lease.id for _, lease in c._ram.held] == ids[1:3] and leases[0].id is None, (ids, c._ram.held)
            fake.passed.update(leases)
            c._ram._reap()
            assert not c._ram.held and leases[3].id is not None, "the window's lease was dropped while it was the window"
            # A read that continues the last one leases on from there, as far
            # as the tier holds the shard (WINDOW at most): the next read of
            # the window asks for no lease.
            out = np.zeros(half, np.uint8)
            assert c._read_ram(out, self.big, mib + half, half, True) == (half, True)
            w = c._ram.window
            assert w.lo == mib + half and w.hi > mib + mib, (w.lo, w.hi)
            real, asked = c.ctl.lease, []
            c.ctl.lease = lambda *a, **k: (asked.append(a), real(*a, **k))[1]
            assert c._read_ram(out, self.big, mib + mib, half, True) == (half, True)
            assert out.tobytes() == data[2 * mib:2 * mib + half] and not asked and c._ram.window is w, asked
            c.ctl.lease = real
            c._ram.drain()
            assert not c._ram.held and c._ram.window is None
            # The drained leases are gone from the daemon: a second drop is refused.
            for lid in ids + [w.lease.id]:
                if lid is not None:
                    expect_errno(errno.ENOENT, ioctl, c.ctl_fd, abi.LEASE_DROP,
                                 abi.LEASE_DROP_REQ.pack(abi.ABI_VERSION, 0, lid))

    @check("whole file: evicted between WHOLE_FILE and the open, and under an open client: fallback, right bytes")
    def whole_evicted(self):
        self.need_whole()
        data = self.data(self.whole)
        with gds.Client(self.mount, ram_direct=False) as before, gds.Client(self.mount, ram_direct=False) as racing:
            out = np.zeros(len(data), np.uint8)
            assert before.read_into(out, self.whole, 0, len(data)) == len(data) and before.last_path == "whole-file pread"
            real = racing.ctl.whole_file
            named = []

            def evicting(path):
                file, size = real(path)
                os.unlink(file)  # as the cache's eviction does, after the answer
                named.append(file)
                return file, size

            racing.ctl.whole_file = evicting
            out = np.zeros(len(data), np.uint8)
            assert racing.read_into(out, self.whole, 0, len(data)) == len(data) and out.tobytes() == data
            assert named and racing.last_path in OTHER_PATHS, (named, racing.last_path)
            racing.ctl.whole_file = real
            expect_errno(errno.ENODATA, racing.whole_file, self.whole)
            # A client that had the file open asks again, is told it is gone,
            # and reads elsewhere.
            out = np.zeros(len(data), np.uint8)
            assert before.read_into(out, self.whole, 0, len(data)) == len(data) and out.tobytes() == data
            assert before.last_path in OTHER_PATHS and not before._whole._open, before.last_path

    def run(self):
        # The shared RAM tier's checks first: they need a shard no other
        # check has read into the tier.
        for t in (self.ram_lease, self.ram_lease_async, self.whole_file, self.whole_read_into, self.whole_cufile_engine, self.whole_evicted, self.capabilities, self.read_bytes, self.read_fd, self.read_into, self.read_range_errors,
                  self.buffer_errors, self.register_errors, self.other_uid, self.malformed, self.lease,
                  self.direct_choice, self.batch_bytes, self.batch_async, self.batch_errors, self.batch_client_dies,
                  self.pipeline, self.still_serves):
            t()
        self.client.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mount", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--whole", help="a shard the cache holds whole")
    ap.add_argument("--cold", help="a shard the cache does not hold whole")
    a = ap.parse_args()
    Suite(a.mount, a.source, a.whole, a.cold).run()
    line = "%d passed, %d failed" % (RESULTS["passed"], RESULTS["failed"])
    if RESULTS["skipped"]:
        line += ", %d skipped" % RESULTS["skipped"]
    print(line)
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
