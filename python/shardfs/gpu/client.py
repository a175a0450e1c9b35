"""Client for the shardfs GPU side interface.

Reads shard bytes from a shardfs mount without read(2): the daemon fills a
shared-memory buffer this process registered (staged path), or hands out the
cache ring extents that hold the bytes so cuFile/kvikio reads them from NVMe
straight into GPU memory (direct path).

    with Client("/mnt/shards") as c:
        print(c.capabilities())
        arr = numpy.empty(8 << 20, numpy.uint8)
        c.read_into(arr, "train/shard-000.tar", 0, arr.nbytes)

Only the standard library and numpy are required; torch is used when dst is
a torch tensor. The direct path reads through kvikio when it is installed,
else through libcufile itself (shardfs.cufile, ctypes).

The ABI (gds/abi.go is the reference): restricted ioctls of type 0xBD on the
ctl file /.shardfs/ctl (path in the struct) or on a shard's fd (path
ignored); little-endian fixed-size structs that start with u32 version and
u32 flags. Errors arrive as OSError with the errno documented in
gds/errno.go.
"""

import errno
import fcntl
import json
import mmap
import os
import secrets
import struct
import threading

import numpy as np

from . import ramtier, wholefile

ABI_VERSION = 3  # 2 added the batch commands (SUBMIT, WAIT), 3 LEASE_FROM_RAM; READ and the rest still take 1
IOCTL_TYPE = 0xBD
SHM_NAME_SIZE = 256
PATH_SIZE = 1024
MAX_LEASE_EXTENTS = 64
MAX_LEASE_PATHS = 4

_IOC_WRITE, _IOC_READ = 1, 2


def _ioc(direction, nr, size):
    return (direction << 30) | (size << 16) | (IOCTL_TYPE << 8) | nr


_HDR = "<II"  # version, flags
_REGISTER = struct.Struct(_HDR + "QQ%ds" % SHM_NAME_SIZE)  # size, buf_id, name
_UNREGISTER = struct.Struct(_HDR + "Q")  # buf_id
_READ = struct.Struct(_HDR + "QQQQQ%ds" % PATH_SIZE)  # off, len, buf_id, buf_off, bytes_read, path
_LEASE_HEAD = struct.Struct(_HDR + "QQQQII%ds" % PATH_SIZE)  # off, len, lease_id, covered, n_ext, n_paths, path
_EXTENT = struct.Struct("<IIQQQ")  # path_index, reserved, cache_offset, length, file_offset
_LEASE_SIZE = _LEASE_HEAD.size + MAX_LEASE_EXTENTS * _EXTENT.size + MAX_LEASE_PATHS * PATH_SIZE
_LEASE_DROP = struct.Struct(_HDR + "Q")  # lease_id
_SUBMIT = struct.Struct(_HDR + "QQIIQQ")  # queue_buf_id, entries_off, count, reserved, accepted, completed
_WAIT = struct.Struct(_HDR + "QIIQ")  # target, timeout_ms, reserved, completed
_WHOLE = struct.Struct(_HDR + "Q%ds%ds" % (PATH_SIZE, PATH_SIZE))  # size (out), path, file (out)
SUBMIT_WAIT = 1  # SUBMIT flag: return once every entry has completed
LEASE_UNLESS_IN_RAM = 1  # LEASE flag: ENODATA when the whole range is in the RAM tier
LEASE_FROM_RAM = 2  # LEASE flag (ABI 3): extents in the shared RAM tier's file; ENODATA when not all there
ENTRY_DONE = 1  # an entry's state word once the daemon wrote its result
# One queue entry: user_data, file_offset, length, buf_id, buf_offset,
# path_off, path_len, result (out), state (out), reserved.
ENTRY_DTYPE = np.dtype([("user_data", "<u8"), ("file_offset", "<u8"), ("length", "<u8"), ("buf_id", "<u8"),
                        ("buf_offset", "<u8"), ("path_off", "<u4"), ("path_len", "<u4"), ("result", "<i8"),
                        ("state", "<u4"), ("reserved", "<u4")])

REGISTER = _ioc(_IOC_READ | _IOC_WRITE, 1, _REGISTER.size)
UNREGISTER = _ioc(_IOC_WRITE, 2, _UNREGISTER.size)
READ = _ioc(_IOC_READ | _IOC_WRITE, 3, _READ.size)
LEASE = _ioc(_IOC_READ | _IOC_WRITE, 4, _LEASE_SIZE)
LEASE_DROP = _ioc(_IOC_WRITE, 5, _LEASE_DROP.size)
SUBMIT = _ioc(_IOC_READ | _IOC_WRITE, 6, _SUBMIT.size)
WAIT = _ioc(_IOC_READ | _IOC_WRITE, 7, _WAIT.size)
# Announced by the capabilities (commands.whole_file), not by the ABI version.
WHOLE_FILE = _ioc(_IOC_READ | _IOC_WRITE, 8, _WHOLE.size)


def _cstr(s, size):
    b = s.encode() if isinstance(s, str) else bytes(s)
    if len(b) >= size or b"\0" in b:
        raise ValueError("%r does not fit a %d-byte field" % (s, size))
    return b


class Buffer:
    """A /dev/shm buffer registered with the daemon on one fd (the ctl file
    or a shard's fd); only READs on that fd may use it."""

    def __init__(self, client, buf_id, size, mm, fd=None):
        self.client, self.id, self.size, self.mm = client, buf_id, size, mm
        self.fd = client.ctl_fd if fd is None else fd
        self.array = np.frombuffer(mm, dtype=np.uint8)  # zero-copy view
        self.host_registered = False  # cudaHostRegister done

    def unregister(self):
        if self.id is not None:
            self.client._ioctl(self.fd, UNREGISTER, _UNREGISTER.pack(ABI_VERSION, 0, self.id))
            self.id = None


class Extent:
    __slots__ = ("path", "cache_offset", "length", "file_offset")

    def __init__(self, path, cache_offset, length, file_offset):
        self.path, self.cache_offset, self.length, self.file_offset = path, cache_offset, length, file_offset

    def __repr__(self):
        return "Extent(%s@%d+%d -> %d)" % (self.path, self.cache_offset, self.length, self.file_offset)


class Lease:
    """Cache extents pinned until drop() (or until the client closes)."""

    def __init__(self, client, lease_id, covered, extents):
        self.client, self.id, self.covered, self.extents = client, lease_id, covered, extents

    def drop(self):
        if self.id is not None:
            self.client._ioctl(self.client.ctl_fd, LEASE_DROP, _LEASE_DROP.pack(ABI_VERSION, 0, self.id))
            self.id = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.drop()


class Client:
    """One handle on a mount's side interface.

    buffer_size is the staging buffer registered at open (0: none). Every
    buffer and lease made through this client dies when it is closed.

    direct chooses the path of a CUDA dst: None reads leases with cuFile
    only where it is real GPUDirect Storage (in compatibility mode cuFile
    does a POSIX read and a copy, which the staged path does as fast),
    True whenever cuFile loads, False never.

    whole_files: read a shard the cache holds whole from that file (see
    shardfs.wholefile) before any other path; cufile: for a CUDA dst read
    that file with cuFile (None or True: when kvikio or libcufile loads, in
    GDS or compatibility mode; False: never, preads and a copy instead).

    After each read_into, last_path names the path it took ("whole-file
    cufile", "whole-file pread", "lease cufile", "lease", "batch", "read")
    and path_stats counts calls and bytes per path.
    """

    # A read of fewer chunks than this goes one READ at a time: on an H100
    # node an 8 MiB read_into ran at 11.4 GB/s that way and 6.8 GB/s as
    # two pipelined chunks, whose queue round trips it could not hide.
    PIPELINE_MIN_CHUNKS = 4

    def __init__(self, mount, buffer_size=64 << 20, shm_dir="/dev/shm", direct=None, chunk_size=4 << 20,
                 batch=None, whole_files=True, cufile=None, ram_direct=None):
        self.mount = os.path.abspath(mount)
        self.direct = direct
        self.chunk_size = chunk_size
        self._batch = batch  # None: use the batch commands where the daemon has them
        self._queue = None
        self._engines = {}  # "cuda" / "host": the pipeline's copy engine
        # One read at a time per client: the staging buffer and the queue
        # are shared by every call (threads wanting parallel reads open a
        # Client each).
        self._lock = threading.RLock()
        self._ring_direct = None  # False once the ring file refused O_DIRECT opens
        self._ring_fds = {}
        self._backend = None
        self._turn = 0  # the staging half the next copy to a GPU uses
        self.shm_dir = shm_dir
        self.ctl_fd = os.open(os.path.join(self.mount, ".shardfs", "ctl"), os.O_RDONLY | os.O_CLOEXEC)
        self._caps = None
        self._cuda_events = None
        self._cufiles = {}
        self._whole = wholefile.WholeFiles(self, cufile) if whole_files else None
        # None: copy from the daemon's shared RAM tier where it has one;
        # False: never (set after the tier's file would not open or register).
        self._ram_direct = ram_direct
        self._ram = ramtier.SharedRAM(self)
        self.last_path = None
        self.path_stats = {}  # path name -> {"calls": n, "bytes": n}
        self.staging = self.register_buffer(buffer_size) if buffer_size else None

    # --- plumbing -----------------------------------------------------------

    @staticmethod
    def _ioctl(fd, cmd, payload):
        buf = bytearray(payload)
        fcntl.ioctl(fd, cmd, buf, True)
        return buf

    def _rel(self, path):
        """A path relative to the mount root (absolute paths under it accepted)."""
        if isinstance(path, int):
            return ""
        p = os.fspath(path)
        if os.path.isabs(p):
            p = os.path.relpath(os.path.abspath(p), self.mount)
            if p.startswith(".."):
                raise ValueError("%s is not under %s" % (path, self.mount))
        return p

    def close(self):
        self._ram.close()  # its copies finish, its leases are dropped
        self._queue = None  # unregistered with the fd below
        for fd in self._ring_fds.values():
            os.close(fd)
        self._ring_fds.clear()
        for f in self._cufiles.values():
            f.close()
        self._cufiles.clear()
        if self._whole is not None:
            self._whole.close()
        if self.staging is not None and self.staging.host_registered:
            import torch

            torch.cuda.synchronize()
            torch.cuda.cudart().cudaHostUnregister(self.staging.array.ctypes.data)
            self.staging.host_registered = False
        if self.ctl_fd >= 0:
            os.close(self.ctl_fd)  # the daemon drops our buffers and leases
            self.ctl_fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- capabilities and buffers ---------------------------------------------

    def capabilities(self):
        if self._caps is None:
            with open(os.path.join(self.mount, ".shardfs", "ctl"), "rb") as f:
                self._caps = json.loads(f.read())
            if self._caps.get("min_abi_version", 1) > ABI_VERSION:
                raise OSError(errno.EPROTO, "shardfs ABI %s..%s, client speaks %d" % (
                    self._caps.get("min_abi_version"), self._caps.get("abi_version"), ABI_VERSION))
        return self._caps

    def batch_available(self):
        """Whether reads go through the batch commands (SUBMIT/WAIT)."""
        if self._batch is None:
            self._batch = self.capabilities().get("abi_version", 1) >= 2
        return self._batch

    def queue(self):
        """The client's batch queue on the ctl file (made on first use)."""
        if self._queue is None:
            from .pipeline import Queue

            entries = self.capabilities().get("batch", {}).get("max_batch", 256)
            self._queue = Queue(self, entries=min(entries, 256))
        return self._queue

    def register_shm(self, name, size, fd=None):
        """REGISTER an existing /dev/shm file by name on fd (default: the
        ctl file); returns the buffer id."""
        req = _REGISTER.pack(ABI_VERSION, 0, size, 0, _cstr(name, SHM_NAME_SIZE))
        out = self._ioctl(self.ctl_fd if fd is None else fd, REGISTER, req)
        return _REGISTER.unpack(out)[3]

    def register_buffer(self, size, fd=None):
        """Create a 0600 /dev/shm file of size bytes, register it on fd
        (default: the ctl file) and map it.

        The name is unlinked once registered: the daemon and this process
        hold the memory, and nothing is left behind in /dev/shm.
        """
        name = "shardfs-%d-%s" % (os.getpid(), secrets.token_hex(8))
        path = os.path.join(self.shm_dir, name)
        on = fd
        shm = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(shm, 0o600)  # exact mode, whatever the umask
            os.ftruncate(shm, size)
            mm = mmap.mmap(shm, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            buf_id = self.register_shm(name, size, fd=on)
        finally:
            os.unlink(path)
            os.close(shm)
        return Buffer(self, buf_id, size, mm, fd=on)

    # --- staged path ----------------------------------------------------------

    def read(self, path, offset, length, buf=None, buf_offset=0):
        """READ length bytes at offset of path into buf (default: staging).

        path is relative to the mount root, absolute under it, or an open
        fd of a shard in the mount (then buf must be registered on that fd).
        Returns the bytes read (short at EOF).
        """
        buf = buf or self.staging
        fd = path if isinstance(path, int) else self.ctl_fd
        req = _READ.pack(ABI_VERSION, 0, offset, length, buf.id if buf.id is not None else 0,
                         buf_offset, 0, _cstr(self._rel(path), PATH_SIZE))
        out = self._ioctl(fd, READ, req)
        return _READ.unpack(out)[6]

    def read_into(self, dst, path, offset, length):
        """Fill dst (numpy array or torch tensor, contiguous) with length
        bytes of path from offset. Returns the bytes read.

        A CUDA tensor goes the direct path (LEASE + cuFile) when the
        client's direct setting allows it (see Client), else the staged
        path. Staged reads are pipelined where the daemon has the batch
        commands: the range is split into chunk_size chunks, one per slot of
        the staging buffer (registered once with cudaHostRegister) in
        flight, and each chunk's copy out of the staging buffer starts as
        soon as it lands (non-blocking on a CUDA stream for a CUDA tensor).
        A read of fewer than PIPELINE_MIN_CHUNKS chunks, one on a shard's
        fd, or one against an older daemon goes one READ at a time.
        """
        with self._lock:
            cuda = _is_torch(dst) and dst.is_cuda
            done, complete = self._read_ram(dst, path, offset, length, cuda)
            if complete:
                return done
            if done:
                # The tier held the start of the range: the rest another way.
                return done + self._read_into_rest(_bytes_view(dst)[done:], path, offset + done, length - done, cuda)
            return self._read_into_rest(dst, path, offset, length, cuda)

    def _read_into_rest(self, dst, path, offset, length, cuda):
        """read_into by the paths after the shared RAM tier's."""
        if self._whole is not None and self._whole.usable and self.whole_files_available():
            n = self._read_whole(dst, path, offset, length, cuda)
            if n is not None:
                return n
        if cuda and self._direct_backend():
            try:
                return self._note("lease cufile", self._read_direct(dst, path, offset, length))
            except DirectPathError:
                self._backend = False  # cuFile cannot read the ring here: stop trying
            except OSError as e:
                if e.errno not in (errno.ENODATA, errno.EOPNOTSUPP):
                    raise
        if (not isinstance(path, int) and self.staging is not None and length >= self.PIPELINE_MIN_CHUNKS *
                min(self.chunk_size, self.staging.size) and self.batch_available()):
            return self._read_pipelined(dst, path, offset, length)
        return self._note("read", self._read_staged(dst, path, offset, length))

    # --- the shared RAM tier ------------------------------------------------------

    def ram_leases_available(self):
        """Whether the daemon's RAM tier is shared (LEASE_FROM_RAM)."""
        return self._ram_direct is not False and bool(self.capabilities().get("ram_leases"))

    def _read_ram(self, dst, path, offset, length, cuda):
        """(bytes, complete): how much of [offset, offset+length) read_into
        copied straight from the shared RAM tier (all of it up to the end of
        the shard: complete; the first part; or none)."""
        if not self.ram_leases_available():
            return 0, False
        out = _bytes_view(dst)
        if out.shape[0] < length:
            raise ValueError("dst holds %d bytes, %d asked" % (out.shape[0], length))
        size = os.fstat(path).st_size if isinstance(path, int) else os.stat(os.path.join(self.mount, self._rel(path))).st_size
        want = max(0, min(length, size - offset))
        if want == 0:
            return 0, False
        if _is_torch(out) and not out.is_cuda:
            out = out.numpy()
        try:
            n = self._ram.read(out, path, offset, want, cuda)
        except OSError:
            # The tier's file did not open (another user's daemon) or
            # register: the other paths from now on, and for all of dst.
            self._ram_direct = False
            self._ram.close()
            return 0, False
        if n:
            self._note("ram lease", n)
        return n, n == want

    def _note(self, name, n):
        self.last_path = name
        st = self.path_stats.setdefault(name, {"calls": 0, "bytes": 0})
        st["calls"] += 1
        st["bytes"] += n
        return n

    # --- whole cached shards ---------------------------------------------------

    def whole_files_available(self):
        """Whether the daemon may name whole-shard files (WHOLE_FILE)."""
        caps = self.capabilities()
        return bool(caps.get("whole_files")) and "whole_file" in caps.get("commands", {})

    def whole_file(self, path):
        """WHOLE_FILE: (file, size) of the cache's whole-shard file of path
        (relative, absolute under the mount, or a shard's fd). OSError
        ENODATA: not held whole; EACCES: this uid could not open it;
        EOPNOTSUPP: no whole-shard files; ENOTTY: an older daemon."""
        fd = path if isinstance(path, int) else self.ctl_fd
        req = _WHOLE.pack(ABI_VERSION, 0, 0, _cstr(self._rel(path), PATH_SIZE), b"")
        _, _, size, _, file = _WHOLE.unpack(self._ioctl(fd, WHOLE_FILE, req))
        return file.split(b"\0", 1)[0].decode(), size

    def whole_file_mode(self):
        """How a whole file is read into a CUDA dst: the cuFile engine's
        mode (a phrase), or None (preads and a copy)."""
        engine = self._whole.cufile_engine() if self._whole is not None else None
        return engine.mode() if engine else None

    def _read_whole(self, dst, path, offset, length, cuda):
        """read_into from the whole-shard file, or None when the shard is
        not held whole or its file does not open (the other paths then)."""
        out = _bytes_view(dst)
        if out.shape[0] < length:
            raise ValueError("dst holds %d bytes, %d asked" % (out.shape[0], length))
        if _is_torch(out) and not out.is_cuda:
            out = out.numpy()
        try:
            n, name = self._whole.read(out, path, offset, length, cuda)
        except (wholefile.Unavailable, OSError):
            return None  # the other paths write all of dst again
        return self._note(name, n)

    def _ring_fd(self, path):
        fd = self._ring_fds.get(path)
        if fd is None:
            fd = self._ring_fds[path] = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
        return fd

    def _read_pipelined(self, dst, path, offset, length, engine=None):
        from . import pipeline

        out = _bytes_view(dst)
        if out.shape[0] < length:
            raise ValueError("dst holds %d bytes, %d asked" % (out.shape[0], length))
        rel = self._rel(path)
        length = max(0, min(length, os.stat(os.path.join(self.mount, rel)).st_size - offset))
        if length == 0:
            return 0
        chunk = min(self.chunk_size, self.staging.size)
        if engine is None:
            engine = self._copy_engine("cuda" if _is_torch(dst) and dst.is_cuda else "host")
        if _is_torch(out) and not out.is_cuda:
            out = out.numpy()
        if self._ring_direct is not False and self.capabilities().get("leases"):
            # Ring-resident bytes: read by this process from the disk, as
            # fast as the disk goes; RAM-tier bytes: copied by the daemon.
            try:
                return self._note("lease", pipeline.read_leased(self, self.staging, out, rel, offset, length, chunk,
                                                                engine))
            except pipeline.NotLeased:
                pass
        return self._note("batch", pipeline.read_chunks(self.queue(), self.staging, out, rel, offset, length, chunk,
                                                        engine))

    def _copy_engine(self, kind):
        """The copy engine out of the staging buffer ("cuda" or "host"),
        made once; a CUDA one has an event per chunk_size slot."""
        from . import pipeline

        engine = self._engines.get(kind)
        if engine is None:
            if kind == "cuda":
                self._pin_staging()
                engine = pipeline.CudaCopyEngine(max(1, self.staging.size // min(self.chunk_size, self.staging.size)))
            else:
                engine = pipeline.HostCopyEngine(record=False)
            self._engines[kind] = engine
        return engine

    def _read_staged(self, dst, path, offset, length):
        if self.staging is None:
            raise ValueError("client opened without a staging buffer")
        out = _bytes_view(dst)
        if out.shape[0] < length:
            raise ValueError("dst holds %d bytes, %d asked" % (out.shape[0], length))
        cuda = _is_torch(dst) and dst.is_cuda
        half = self.staging.size // 2 if cuda else self.staging.size
        # The halves alternate across calls too: the READ of the next call
        # overlaps the copy to the GPU of this one.
        done, turn = 0, self._turn
        while done < length:
            stage_off = half * turn if cuda else 0
            if cuda:
                self._cuda_wait(turn)  # the previous copy out of this half has finished
            n = self.read(path, offset + done, min(half, length - done), self.staging, stage_off)
            if n == 0:
                break
            src = self.staging.array[stage_off:stage_off + n]
            if cuda:
                self._copy_to_cuda(out, done, src, turn)
                turn ^= 1
            elif _is_torch(out):
                import torch

                out[done:done + n].copy_(torch.from_numpy(src))
            else:
                out[done:done + n] = src
            done += n
        self._turn = turn
        return done

    def _pin_staging(self):
        """cudaHostRegister the staging buffer once: copies out of it are DMA."""
        import torch

        if not self.staging.host_registered:
            a = self.staging.array
            rc = torch.cuda.cudart().cudaHostRegister(a.ctypes.data, a.nbytes, 0)
            if int(rc) != 0:
                raise OSError(errno.EIO, "cudaHostRegister failed: %s" % rc)
            self.staging.host_registered = True

    def _copy_to_cuda(self, out, at, src, turn):
        import torch

        self._pin_staging()
        if self._cuda_events is None:
            self._cuda_events = [torch.cuda.Event(), torch.cuda.Event()]
        out[at:at + src.shape[0]].copy_(torch.from_numpy(src), non_blocking=True)
        self._cuda_events[turn].record()

    def _cuda_wait(self, turn):
        if self._cuda_events is not None:
            self._cuda_events[turn].synchronize()

    # --- direct path ----------------------------------------------------------

    def lease(self, path, offset, length, flags=0):
        """LEASE: pin the cache extents holding [offset, offset+covered).
        flags LEASE_UNLESS_IN_RAM: ENODATA when the range is all in RAM."""
        fd = path if isinstance(path, int) else self.ctl_fd
        req = bytearray(_LEASE_SIZE)
        _LEASE_HEAD.pack_into(req, 0, ABI_VERSION, flags, offset, length, 0, 0, 0, 0, _cstr(self._rel(path), PATH_SIZE))
        out = self._ioctl(fd, LEASE, req)
        _, _, _, _, lease_id, covered, n_ext, n_paths, _ = _LEASE_HEAD.unpack_from(out, 0)
        if n_ext > MAX_LEASE_EXTENTS or n_paths > MAX_LEASE_PATHS:
            raise OSError(errno.EPROTO, "malformed LEASE reply")
        paths_at = _LEASE_HEAD.size + MAX_LEASE_EXTENTS * _EXTENT.size
        paths = [bytes(out[paths_at + i * PATH_SIZE:paths_at + (i + 1) * PATH_SIZE]).split(b"\0", 1)[0].decode()
                 for i in range(n_paths)]
        extents = []
        for i in range(n_ext):
            idx, _, cache_off, n, file_off = _EXTENT.unpack_from(out, _LEASE_HEAD.size + i * _EXTENT.size)
            extents.append(Extent(paths[idx], cache_off, n, file_off))
        return Lease(self, lease_id, covered, extents)

    def direct_mode(self):
        """How the direct path reads (a phrase), or None when it is not used."""
        backend = self._direct_backend()
        return backend.mode() if backend else None

    def _direct_backend(self):
        if self._backend is None:
            self._backend = False
            if self.direct is not False and self.capabilities().get("leases"):
                self._backend = _kvikio_backend(self.direct) or _cufile_backend(self.direct) or False
        return self._backend or None

    def _read_direct(self, dst, path, offset, length):
        backend = self._direct_backend()
        if backend is None:
            raise OSError(errno.EOPNOTSUPP, "no direct path: no kvikio or cuFile, or no cache ring")
        out = _bytes_view(dst)
        if out.shape[0] < length:
            raise ValueError("dst holds %d bytes, %d asked" % (out.shape[0], length))
        done = 0
        while done < length:
            with self.lease(path, offset + done, length - done) as lease:
                for e in lease.extents:
                    f = self._cufiles.get(e.path)
                    if f is None:
                        try:
                            f = self._cufiles[e.path] = backend.open(e.path)
                        except (OSError, RuntimeError) as err:
                            raise DirectPathError("%s cannot open the cache file %s: %s" % (backend.mode(), e.path, err))
                    at = e.file_offset - offset
                    f.read(out[at:at + e.length], e.cache_offset)
                done += lease.covered
            if lease.covered == 0:
                break
        return done


class DirectPathError(OSError):
    """cuFile could not open a cache file (no nvidia-fs and no udev data for
    the disk, say); read_into then uses the staged path."""

    def __init__(self, msg):
        super().__init__(errno.EIO, msg)


class _KvikioBackend:
    def __init__(self, kvikio, compat):
        self.kvikio, self.compat = kvikio, compat

    def mode(self):
        return "kvikio, " + ("compatibility mode" if self.compat else "cuFile")

    def open(self, path):
        f = self.kvikio.CuFile(path, "r")

        class _File:
            def read(self, view, cache_offset):
                n = _nbytes(view)
                got = f.pread(view, n, cache_offset).get()
                if got != n:
                    raise OSError(errno.EIO, "kvikio read %d of %d bytes at %d" % (got, n, cache_offset))

            def close(self):
                f.close()
        return _File()


def _kvikio_backend(force):
    try:
        import kvikio
        import kvikio.defaults
    except ImportError:
        return None
    compat = True
    for probe in ("is_compat_mode_preferred", "compat_mode"):
        f = getattr(kvikio.defaults, probe, None)
        if f is not None:
            compat = bool(f())
            break
    if compat and not force:
        return None  # a POSIX read and a copy: the staged path is as fast
    return _KvikioBackend(kvikio, compat)


class _CuFileBackend:
    def __init__(self, driver):
        self.driver = driver

    def mode(self):
        return "cuFile " + self.driver.mode()

    def open(self, path):
        f = self.driver.open(path)

        class _File:
            def read(self, view, cache_offset):
                n = f.pread(view.data_ptr(), view.numel(), cache_offset)
                if n != view.numel():
                    raise OSError(errno.EIO, "cuFile read %d of %d bytes at %d" % (n, view.numel(), cache_offset))

            def close(self):
                f.close()
        return _File()


def _cufile_backend(force):
    from . import cufile as shardfs_cufile

    if not force and not shardfs_cufile.nvfs_loaded():
        return None  # compatibility mode: the staged path is as fast
    try:
        driver = shardfs_cufile.CuFile()
    except OSError:
        return None
    if not driver.gds and not force:
        return None
    return _CuFileBackend(driver)


def _nbytes(view):
    return view.numel() if _is_torch(view) else view.nbytes


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _bytes_view(dst):
    """dst as a flat uint8 view sharing its memory."""
    if _is_torch(dst):
        import torch

        if not dst.is_contiguous():
            raise ValueError("dst tensor must be contiguous")
        return dst.view(-1).view(torch.uint8)
    a = np.asarray(dst)
    if not a.flags.c_contiguous or not a.flags.writeable:
        raise ValueError("dst array must be contiguous and writeable")
    return a.reshape(-1).view(np.uint8)
