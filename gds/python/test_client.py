"""Tests of the GPU side interface through a real shardfs mount (no GPU).

    /usr/bin/python3 gds/python/test_client.py --mount MNT --source DIR

DIR holds the same files as the mount. Prints each check, then
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

RESULTS = {"passed": 0, "failed": 0, "skipped": 0}


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
    def __init__(self, mount, source):
        self.mount, self.source = mount, source
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
        want = {"register": gds.REGISTER, "unregister": gds.UNREGISTER, "read": gds.READ,
                "lease": gds.LEASE, "lease_drop": gds.LEASE_DROP}
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
        bogus = gds.Buffer(self.client, 987654321, 4096, bytearray(4096))
        expect_errno(errno.EBADF, self.client.read, self.big, 0, 1, bogus)
        extra = self.client.register_buffer(4096)
        assert self.client.read(self.big, 0, 10, extra) == 10
        stale_id = extra.id
        extra.unregister()
        expect_errno(errno.EBADF, self.client.read, self.big, 0, 1, gds.Buffer(self.client, stale_id, 4096, bytearray(4096)))
        with gds.Client(self.mount, buffer_size=0) as other:
            theirs = gds.Buffer(other, self.client.staging.id, 4096, bytearray(4096))
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
        req = gds._READ.pack(2, 0, 0, 1, self.client.staging.id, 0, 0, self.big.encode())
        expect_errno(errno.EPROTO, gds.Client._ioctl, self.client.ctl_fd, gds.READ, req)
        expect_errno(errno.ENOTTY, gds.Client._ioctl, self.client.ctl_fd, gds._ioc(3, 60, 16), bytes(16))

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
        stale = gds.Lease(self.client, lease_id, 0, [])
        expect_errno(errno.ENOENT, stale.drop)
        expect_errno(errno.ERANGE, self.client.lease, self.big, len(data), 1)

    @check("direct path: chosen only with real GDS; a missing libcufile is a clean ENOENT")
    def direct_choice(self):
        import shardfs.cufile as shardfs_cufile

        try:
            import kvikio  # noqa: F401
            has_kvikio = True
        except ImportError:
            has_kvikio = False
        with gds.Client(self.mount, buffer_size=0) as c:
            mode = c.direct_mode()
            if not has_kvikio and not shardfs_cufile.nvfs_loaded():
                assert mode is None, "direct path %r chosen without nvidia-fs or kvikio" % mode
        with gds.Client(self.mount, buffer_size=0, direct=False) as c:
            assert c.direct_mode() is None
        try:
            shardfs_cufile.CuFile(candidates=[os.path.join(self.source, "no-such-libcufile.so")])
        except OSError as e:
            assert e.errno == errno.ENOENT and "no-such-libcufile.so" in str(e), e
        else:
            raise AssertionError("a missing libcufile loaded")

    def run(self):
        for t in (self.capabilities, self.read_bytes, self.read_fd, self.read_into, self.read_range_errors,
                  self.buffer_errors, self.register_errors, self.other_uid, self.malformed, self.lease,
                  self.direct_choice, self.still_serves):
            t()
        self.client.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mount", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    Suite(a.mount, a.source).run()
    line = "%d passed, %d failed" % (RESULTS["passed"], RESULTS["failed"])
    if RESULTS["skipped"]:
        line += ", %d skipped" % RESULTS["skipped"]
    print(line)
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
