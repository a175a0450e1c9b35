"""The lease paths: ring-resident bytes read by the client itself, behind
Client.read_into.

LEASE pins the cache ring's extents that hold a range and names them (file,
offset); while the lease is held the daemon does not reuse those blocks.
read_leased() reads the extents with O_DIRECT into the staging buffer and
hands each chunk to a copy engine (engines.py); read_direct() reads them
with cuFile straight into a CUDA tensor (cufile.py).
"""

import errno
import os

from . import abi


class RingFiles:
    """The ring files a client opened with O_DIRECT, and whether they may
    be opened at all (refused: another user's cache)."""

    def __init__(self):
        self.refused = False
        self._fds = {}

    def fd(self, path):
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
        return fd

    def close(self):
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


class NotLeased(Exception):
    """The range is not read from the ring by the client itself: the READ
    path serves it (in the RAM tier, not cached, or the ring file closed to
    this process)."""


def read_leased(ctl, ring, staging, out, rel, offset, length, chunk, engine, unless_in_ram=True):
    """Reads a ring-resident range the way the disk is fastest: the client
    LEASEs each chunk's ring extents and reads them itself with O_DIRECT into
    its staging buffer, in as few requests as the extents allow, then hands
    the chunk to engine. The daemon copies nothing; the lease keeps the
    slots from being reused until the chunk is read.

    Raises NotLeased before reading anything when the first chunk is in the
    RAM tier (READ copies it from memory faster; unless_in_ram=False leases
    it all the same) or cannot be leased; a later chunk that cannot be
    leased is READ by the daemon instead. A ring file that does not open
    marks ring refused."""
    align = ctl.capabilities().get("alignment", 4096)
    if offset % align or chunk % align:
        raise NotLeased("unaligned")
    slots = max(1, staging.size // chunk)
    done, k = 0, 0
    while done < length:
        slot = k % slots
        engine.reuse(slot)
        n = min(chunk, length - done)
        at = slot * chunk
        try:
            lease = ctl.lease(rel, offset + done, n, flags=abi.LEASE_UNLESS_IN_RAM if unless_in_ram else 0)
        except OSError as e:
            if e.errno not in (errno.ENODATA, errno.EOPNOTSUPP, errno.EBUSY, errno.ENOSPC, errno.EMFILE):
                raise
            if done == 0:
                raise NotLeased(e.strerror)
            lease = None
        covered = 0
        if lease is not None:
            with lease:
                try:
                    _read_extents(ring, staging, at, offset + done, lease.extents, align)
                except PermissionError as e:
                    ring.refused = True
                    if done == 0:
                        raise NotLeased(str(e))
                    raise
                covered = lease.covered
        if covered < n:  # the rest of the chunk through the daemon
            got = ctl.read(rel, offset + done + covered, n - covered, staging, at + covered)
            if got != n - covered:
                raise OSError(errno.EIO, "%s at %d: %d of %d bytes" % (rel, offset + done + covered, got, n - covered))
        engine.copy(out, done, staging.array[at:at + n], slot)
        done += n
        k += 1
    engine.finish()
    return length


def _read_extents(ring, staging, at, file_offset, extents, align):
    """O_DIRECT reads of leased extents into staging at `at` (the chunk's
    first byte is file_offset); adjacent extents of one file are read in one
    request. A read whose sector padding would pass the staging buffer goes
    through a small aligned bounce buffer."""
    runs = []
    for e in extents:
        dst = at + e.file_offset - file_offset
        last = runs[-1] if runs else None
        if last and last[0] == e.path and last[1] + last[3] == e.cache_offset and last[2] + last[3] == dst:
            last[3] += e.length
        else:
            runs.append([e.path, e.cache_offset, dst, e.length])
    view = memoryview(staging.mm)
    for path, cache_off, dst, n in runs:
        fd = ring.fd(path)
        padded = -(-n // align) * align
        if dst + padded <= staging.size:
            got = os.preadv(fd, [view[dst:dst + padded]], cache_off)
        else:
            import mmap

            bounce = mmap.mmap(-1, padded)
            got = os.preadv(fd, [bounce], cache_off)
            view[dst:dst + n] = bounce[:n]
            bounce.close()
        if got < n:
            raise OSError(errno.EIO, "%s at %d: %d of %d bytes" % (path, cache_off, got, n))


class DirectPathError(OSError):
    """cuFile could not open a cache file (no nvidia-fs and no udev data for
    the disk, say); read_into then uses the staged path."""

    def __init__(self, msg):
        super().__init__(errno.EIO, msg)


def read_direct(ctl, reader, files, out, path, offset, length):
    """Reads [offset, offset+length) of path into out (a flat uint8 CUDA
    view) by LEASE and cuFile: reader (cufile.reader) reads each leased
    extent from its ring file, opened once and kept in files. Returns the
    bytes read."""
    done = 0
    while done < length:
        with ctl.lease(path, offset + done, length - done) as lease:
            for e in lease.extents:
                f = files.get(e.path)
                if f is None:
                    try:
                        f = files[e.path] = reader.open(e.path)
                    except (OSError, RuntimeError) as err:
                        raise DirectPathError("%s cannot open the cache file %s: %s" % (reader.mode(), e.path, err))
                at = e.file_offset - offset
                f.read(out[at:at + e.length], e.cache_offset)
            done += lease.covered
        if lease.covered == 0:
            break
    return done
