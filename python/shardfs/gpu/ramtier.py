"""read_into straight out of the daemon's shared RAM tier.

When the daemon's RAM tier is shared (`shardfs mount --memory-cache-shared`,
on by default where the daemon sees a GPU), its blocks live in one file in
/dev/shm. LEASE with LEASE_FROM_RAM pins the blocks of a range there and
names their offsets in that file; this client maps the file read-only once,
and copies the leased bytes to their destination itself: a CUDA tensor by
DMA out of the mapping (registered with cudaHostRegister, read-only, a
window at a time as leases reach it), a host array with one memcpy. The
bytes cross host memory once, where a READ into the staging buffer and a
copy out of it cross it three times.

A lease is held until the copies out of its blocks have finished: a CUDA
copy is stream-ordered (the current stream, like a non-blocking
`tensor.copy_`), so its lease is dropped once the event recorded after it
has passed, at a later call or at close.

The daemon refuses (ENODATA) a range not all in the tier; read() then
returns the bytes it did copy, and Client.read_into reads the rest another
way.
"""

import collections
import errno
import mmap
import os

import numpy as np

from . import abi
from .engines import CudaCopyEngine, HostCopyEngine

# cudaHostRegisterReadOnly: the GPU only reads the mapping, which is
# PROT_READ (the daemon's file is the daemon's to write).
_CUDA_HOST_REGISTER_READ_ONLY = 0x08


class _Pins:
    """The windows of the tier's mapping registered with CUDA (read-only),
    so that copies out of it are DMA: a window at a time, as reads reach
    it, and all of them unregistered with the mapping."""

    WINDOW = 256 << 20

    def __init__(self):
        self.windows = {}  # window index -> host address registered

    def pin(self, array, lo, hi):
        """Registers the windows of array that [lo, hi) touches."""
        import torch

        for w in range(lo // self.WINDOW, (hi - 1) // self.WINDOW + 1):
            if w in self.windows:
                continue
            start = w * self.WINDOW
            n = min(self.WINDOW, array.shape[0] - start)
            addr = array.ctypes.data + start
            rc = torch.cuda.cudart().cudaHostRegister(addr, n, _CUDA_HOST_REGISTER_READ_ONLY)
            if int(rc) != 0:
                raise OSError(errno.EIO, "cudaHostRegister (read-only) of the RAM tier: %s" % rc)
            self.windows[w] = addr

    def unpin(self):
        if self.windows:
            import torch

            for addr in self.windows.values():
                torch.cuda.cudart().cudaHostUnregister(addr)
            self.windows.clear()


class _Window:
    """A lease kept across calls: a sequential reader's next reads copy
    from it with no LEASE."""

    __slots__ = ("path", "lo", "hi", "lease", "engine")

    def __init__(self, path, lo, lease, engine):
        self.path, self.lo, self.hi, self.lease = path, lo, lo + lease.covered, lease
        self.engine = engine


class SharedRAM:
    """A client's view of the daemon's shared RAM tier: the mapped file, the
    lease a sequential reader reads on from (the window), and the leases
    whose copies may still be running."""

    # Leases held for copies still in flight, at most: one more waits for
    # the oldest (the daemon allows a handle 64).
    MAX_HELD = 16
    # What a read that continues the last one leases at once: the daemon's
    # most for one LEASE. Its next reads find their blocks pinned already,
    # so an 8 MiB read_into costs no ioctl most of the time; the tier keeps
    # half its slots free of leases however many clients hold windows.
    WINDOW = 64 << 20

    def __init__(self, ctl):
        self.ctl = ctl
        self.path = None
        self.array = None
        self._mm = None
        self._pins = _Pins()
        self._sources = {}  # id of an engine -> its source() of the mapping
        # (engine, lease): the engine's slot for a lease's copies is the lease.
        self.held = collections.deque()
        self.engines = {}
        self.window = None
        self._last = None  # (path, end) of the last read

    def engine(self, cuda):
        kind = "cuda" if cuda else "host"
        e = self.engines.get(kind)
        if e is None:
            e = self.engines[kind] = CudaCopyEngine(own_stream=False) if cuda else HostCopyEngine()
        return e

    def _map(self, path):
        if path == self.path:
            return
        self._unmap()
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            self._mm = mmap.mmap(fd, os.fstat(fd).st_size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self.array = np.frombuffer(self._mm, np.uint8)
        self._sources = {}
        self.path = path

    def _unmap(self):
        if self._mm is None:
            return
        self.drain()
        self._pins.unpin()
        self.array, self._sources = None, {}
        try:
            self._mm.close()
        except BufferError:
            pass  # a view still refers to it; it goes with the view
        self._mm, self.path = None, None

    def _retire_window(self):
        w, self.window = self.window, None
        if w is not None:
            self.held.append((w.engine, w.lease))

    def _reap(self):
        while self.held and (len(self.held) > self.MAX_HELD or self.held[0][0].done(self.held[0][1])):
            eng, lease = self.held.popleft()
            eng.reuse(lease)
            lease.drop()

    def drain(self):
        """Waits for every copy and drops every lease, the window's too."""
        self._retire_window()
        while self.held:
            eng, lease = self.held.popleft()
            eng.reuse(lease)
            lease.drop()

    def _lease(self, path, pos, need, eng):
        """A window from pos on: the blocks the tier holds from pos, up to
        need bytes, or WINDOW for a read that continues the last one (the
        daemon pins the prefix it holds). None when it does not hold pos."""
        self._retire_window()
        self._reap()
        ask = max(need, self.WINDOW) if self._last == (path, pos) else need
        try:
            lease = self.ctl.lease(path, pos, ask, flags=abi.LEASE_FROM_RAM)
        except OSError as e:
            if e.errno in (errno.ENODATA, errno.EMFILE, errno.EBUSY, errno.ENOSPC):
                return None
            raise
        if lease.covered == 0 or not lease.extents:
            lease.drop()
            return None
        try:
            self._map(lease.extents[0].path)  # one file: the tier's
        except BaseException:
            lease.drop()
            raise
        if any(e.path != self.path for e in lease.extents):
            lease.drop()
            raise OSError(errno.EPROTO, "a RAM lease named more than one file")
        self.window = _Window(path, pos, lease, eng)
        return self.window

    def read(self, out, path, offset, length, cuda):
        """Copies [offset, offset+length) of path into out (a flat uint8
        view: numpy, or a CUDA tensor) from the tier and returns the bytes
        copied: fewer than length (0 at first) where the tier does not hold
        the rest. Raises OSError (EACCES: another user's daemon) when the
        tier's file does not open, or does not register with CUDA."""
        eng = self.engine(cuda)
        end, pos = offset + length, offset
        w = self.window
        while pos < end:
            if w is None or w.path != path or not w.lo <= pos < w.hi or w.engine is not eng:
                w = self._lease(path, pos, end - pos, eng)
                if w is None:
                    break
            hi = min(end, w.hi)
            try:
                runs = self._runs(w.lease.extents, pos, hi, offset)
                for i, (dst, at, n) in enumerate(runs):
                    if cuda:
                        self._pins.pin(self.array, at, at + n)
                    self._copy_split(eng, out, dst, at, n, w.lease, i == len(runs) - 1)
            except BaseException:
                eng.finish()
                self.drain()
                raise
            pos = hi
        self._last = (path, pos)
        return pos - offset

    @staticmethod
    def _runs(extents, pos, hi, offset):
        """The parts of [pos, hi) the extents cover, as [out offset, tier
        offset, bytes], neighbours that lie end to end in the tier's file
        joined into one copy."""
        runs = []
        for e in extents:
            lo, top = max(pos, e.file_offset), min(hi, e.file_offset + e.length)
            if lo >= top:
                continue
            at = e.cache_offset + lo - e.file_offset
            last = runs[-1] if runs else None
            if last is not None and last[1] + last[2] == at and last[0] + last[2] == lo - offset:
                last[2] += top - lo
            else:
                runs.append([lo - offset, at, top - lo])
        return runs

    def _copy_split(self, eng, out, at, cache_offset, n, lease, last):
        """One copy per registered window the run lies in: a copy that
        spanned two registrations would not be DMA."""
        window = _Pins.WINDOW
        src = self._source(eng)
        while n > 0:
            k = min(n, window - cache_offset % window)
            eng.copy(out, at, src[cache_offset:cache_offset + k], lease, last and k == n)
            at, cache_offset, n = at + k, cache_offset + k, n - k

    def _source(self, eng):
        """What eng copies out of the mapping from, made once per mapping."""
        src = self._sources.get(id(eng))
        if src is None:
            src = self._sources[id(eng)] = eng.source(self.array)
        return src

    def close(self):
        self._unmap()
        self.drain()
