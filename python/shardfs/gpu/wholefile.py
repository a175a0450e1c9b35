"""Reads of a shard from the cache's whole-shard file, behind Client.read_into.

Where the cache holds a shard as one complete file (made by `shardfs warm`
in CACHE_DIR/shards, its offsets the shard's), WHOLE_FILE names that file
and read_into reads it itself: with cuFile into a CUDA destination (kvikio,
else libcufile through ctypes; GDS proper where the nvidia-fs module is
loaded, compatibility mode elsewhere), with O_DIRECT preads into the staging
buffer otherwise. The daemon copies nothing and pins nothing.

Why this never yields wrong bytes: the daemon names a file only for the
version the client reads, and only to a uid that can open it; a file is
never rewritten, eviction only unlinks it. A named file therefore opens to
that version's bytes or does not open, and then read_into falls back to
leases or READs. A descriptor kept open after its file was evicted still
reads the same bytes.
"""

import collections
import concurrent.futures
import errno
import os
import time

from . import cufile

PATH_CUFILE = "whole-file cufile"
PATH_PREAD = "whole-file pread"

# The daemon will not answer WHOLE_FILE for this client again: too old
# (ENOTTY), no whole-shard files (EOPNOTSUPP), another uid (EACCES).
_NEVER = (errno.ENOTTY, errno.EOPNOTSUPP, errno.EACCES, errno.EPROTO)


class Unavailable(Exception):
    """The shard cannot be read from a whole file now: read_into uses the
    other paths."""


def choose_engine(setting):
    """The cuFile engine for whole files: kvikio, else libcufile (ctypes);
    None when setting is False or neither loads. Unlike the lease path,
    compatibility mode is used too: the file's offsets are the shard's, so
    one cuFile read covers the range, against one READ per chunk."""
    if setting is False:
        return None
    return cufile.reader(True)


class _Open:
    __slots__ = ("fd", "direct", "cufile")

    def __init__(self, fd, direct):
        self.fd, self.direct, self.cufile = fd, direct, None

    def close(self):
        if self.cufile is not None:
            self.cufile.close()
            self.cufile = None
        os.close(self.fd)


class WholeFiles:
    """A Client's whole-file reads: the files it has open (a few, least
    recently used closed first) and the cuFile engine. ctl (a Control) asks
    the daemon for the files."""

    MAX_OPEN = 8
    # preads in flight at once: a disk answers several requests faster than
    # one at a time (the batch path has as many READs in flight), and
    # os.preadv lets go of the GIL while it waits.
    READERS = 4
    # Bytes per pread, at most: the staging buffer is cut into READERS slots
    # of up to this. Fewer, larger preads cost the client less CPU per byte
    # (docs/BENCHMARKS.md compares the sizes).
    PREAD_SIZE = 16 << 20
    # How long a shard the daemon said is not held whole is not asked
    # about again: a mount makes no whole files (warm does, before it), so
    # the answer rarely changes, and each question is an ioctl round trip,
    # as long as a small READ.
    ABSENT_SECONDS = 2.0

    def __init__(self, ctl, cufile=None):
        self.ctl = ctl
        self.cufile = cufile
        self.readers = self.READERS
        self.pread_size = self.PREAD_SIZE
        self._pool = None  # the reader threads, made on first use
        self.engine = None  # None: not chosen yet; False: none
        self.usable = True  # False once the daemon refused for good
        self._open = collections.OrderedDict()  # file path -> _Open
        self._of = {}  # shard path (or fd) -> the file last named for it
        self._absent = {}  # shard path (or fd) -> when to ask again

    def close(self):
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        for f in self._open.values():
            f.close()
        self._open.clear()
        self._of.clear()
        self._absent.clear()

    def _readers(self):
        if self._pool is None and self.readers > 1:
            self._pool = concurrent.futures.ThreadPoolExecutor(self.readers, thread_name_prefix="shardfs-whole")
        return self._pool

    def cufile_engine(self):
        if self.engine is None:
            self.engine = choose_engine(self.cufile) or False
        return self.engine or None

    def _forget(self, key):
        f = self._open.pop(self._of.pop(key, None), None)
        if f is not None:
            f.close()

    def _file(self, path):
        """(file path, size, _Open) of path's whole file. Raises
        Unavailable when the daemon names none or the file does not open
        (evicted since the answer)."""
        key = path if isinstance(path, int) else self.ctl.rel(path)
        if self._absent.get(key, 0) > time.monotonic():
            raise Unavailable("not held whole")
        try:
            file, size = self.ctl.whole_file(path)
        except OSError as e:
            if e.errno in _NEVER:
                self.usable = False
            elif e.errno == errno.ENODATA:
                if len(self._absent) > 4096:
                    self._absent.clear()
                self._absent[key] = time.monotonic() + self.ABSENT_SECONDS
            self._forget(key)
            raise Unavailable(os.strerror(e.errno))
        if self._of.get(key) != file:
            self._forget(key)
        f = self._open.get(file)
        if f is None:
            f = self._open_file(file, size)
            self._open[file] = f
            while len(self._open) > self.MAX_OPEN:
                self._open.popitem(last=False)[1].close()
        self._open.move_to_end(file)
        self._of[key] = file
        return file, size, f

    @staticmethod
    def _open_file(file, size):
        try:
            try:
                fd, direct = os.open(file, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC), True
            except OSError as e:
                if e.errno != errno.EINVAL:  # a filesystem without O_DIRECT (tmpfs)
                    raise
                fd, direct = os.open(file, os.O_RDONLY | os.O_CLOEXEC), False
        except OSError as e:
            raise Unavailable("%s: %s" % (file, e.strerror))
        if os.fstat(fd).st_size != size:
            os.close(fd)
            raise Unavailable("%s is not %d bytes" % (file, size))
        return _Open(fd, direct)

    def read(self, out, path, offset, length, cuda, staging, copier, chunk_size):
        """Reads [offset, offset+length) of path's whole file into out (a
        flat byte view); returns (bytes read, the path name used). Without
        cuFile the file is pread into staging (a Buffer), chunk_size or
        more at a time, and each chunk handed to copier(cuda), the copy
        engine of the staging buffer. Raises Unavailable before writing
        anything the other paths would not write again."""
        file, size, f = self._file(path)
        if offset > size:
            raise Unavailable("offset past the end")  # READ reports ERANGE
        length = max(0, min(length, size - offset))
        if length == 0:
            return 0, PATH_PREAD
        engine = self.cufile_engine() if cuda else None
        if engine is not None:
            try:
                if f.cufile is None:
                    f.cufile = engine.open(file)
                f.cufile.read(out[0:length], offset)
                return length, PATH_CUFILE
            except (OSError, RuntimeError):
                # cuFile refuses the file (no udev data for the disk in
                # compatibility mode, say): preads from here on.
                self.engine = False
        if staging is None:
            raise Unavailable("no staging buffer")
        chunk = min(self.pread_size, max(staging.size // max(1, self.readers), chunk_size), staging.size)
        _pread_chunks(f, staging, out, offset, length, chunk, copier(cuda), self._readers(), self.readers)
        return length, PATH_PREAD


_ALIGN = 4096  # O_DIRECT: offsets, lengths and memory in whole sectors


def _pread_chunks(f, staging, out, offset, length, chunk, copier, pool=None, readers=1):
    """preads [offset, offset+length) of f into the staging buffer's slots
    of chunk bytes, up to readers at once on pool's threads (one at a time
    without a pool), and hands each chunk to copier in order (a copy engine,
    engines.py). With O_DIRECT a read starts on the sector below its
    offset and ends on one above: the first read is shortened so that its
    slot holds the padding, and every later one starts aligned."""
    slots = max(1, staging.size // chunk)  # as many as the copy engine has
    if f.direct:
        chunk = chunk // _ALIGN * _ALIGN  # a slot holds whole sectors
        if chunk == 0:
            raise Unavailable("staging buffer smaller than a sector")
    view = memoryview(staging.mm)
    depth = max(1, min(readers if pool is not None else 1, slots))
    pending = collections.deque()  # (future or bytes read, slot, dst offset, head, n), in file order
    try:
        planned, k, done = 0, 0, 0
        while done < length:
            while planned < length and len(pending) < depth:
                slot = k % slots
                copier.reuse(slot)  # the copy out of this slot is over
                pos = offset + planned
                head = pos % _ALIGN if f.direct else 0
                n = min(chunk - head, length - planned)
                want = -(-(head + n) // _ALIGN) * _ALIGN if f.direct else n
                args = (f.fd, [view[slot * chunk:slot * chunk + want]], pos - head)
                got = pool.submit(os.preadv, *args) if depth > 1 else os.preadv(*args)
                pending.append((got, slot, planned, head, n))
                planned += n
                k += 1
            got, slot, at, head, n = pending.popleft()
            if not isinstance(got, int):
                got = got.result()
            if got < head + n:
                raise OSError(errno.EIO, "whole-shard file at %d: %d of %d bytes" % (offset + at, max(0, got - head), n))
            base = slot * chunk
            copier.copy(out, at, staging.array[base + head:base + head + n], slot)
            done += n
    finally:
        # Nothing may still write into staging, nor copy out of it, once
        # this returns: the other paths may reuse it at once.
        for got, *_ in pending:
            if not isinstance(got, int):
                concurrent.futures.wait([got])
        copier.finish()
