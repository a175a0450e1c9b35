"""Client: the GPU side interface of a shardfs mount, composed of its paths.

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
else through libcufile itself (cufile.py, ctypes).

read_into tries, in order: the shared RAM tier (ramtier.py), the cache's
whole-shard file (wholefile.py), ring extents read with cuFile for a CUDA
dst (lease.py, read_direct), ring extents read by this process or batched
READs, pipelined (lease.py read_leased, batch.py), and single READs into
the staging buffer. The ABI is abi.py; the commands, ctl.py.
"""

import errno
import threading

import numpy as np

from . import cufile, lease, ramtier, wholefile
from .batch import Queue, read_chunks
from .ctl import Control
from .engines import CudaCopyEngine, HostCopyEngine

DirectPathError = lease.DirectPathError


class Client:
    """One handle on a mount's side interface.

    buffer_size is the staging buffer registered at open (0: none). Every
    buffer and lease made through this client dies when it is closed.

    direct chooses the path of a CUDA dst: None reads leases with cuFile
    only where it is real GPUDirect Storage (in compatibility mode cuFile
    does a POSIX read and a copy, which the staged path does as fast),
    True whenever cuFile loads, False never.

    whole_files: read a shard the cache holds whole from that file (see
    wholefile.py) before any other path; cufile: for a CUDA dst read that
    file with cuFile (None or True: when kvikio or libcufile loads, in GDS
    or compatibility mode; False: never, preads and a copy instead).

    After each read_into, last_path names the path it took ("ram lease",
    "whole-file cufile", "whole-file pread", "lease cufile", "lease",
    "batch", "read") and path_stats counts calls and bytes per path.
    """

    # A read of fewer chunks than this goes one READ at a time: a short read
    # cannot hide the queue's round trips behind its copies, and one READ
    # into alternating staging halves is faster for it.
    PIPELINE_MIN_CHUNKS = 4

    def __init__(self, mount, buffer_size=64 << 20, shm_dir="/dev/shm", direct=None, chunk_size=4 << 20,
                 batch=None, whole_files=True, cufile=None, ram_direct=None):
        self.ctl = Control(mount, shm_dir)
        self.mount = self.ctl.mount
        self.shm_dir = shm_dir
        self.direct = direct
        self.chunk_size = chunk_size
        self._batch = batch  # None: use the batch commands where the daemon has them
        self._queue = None
        self._engines = {}  # "cuda" / "host": the staging buffer's copy engine
        # One read at a time per client: the staging buffer and the queue
        # are shared by every call (threads wanting parallel reads open a
        # Client each).
        self._lock = threading.RLock()
        self._ring = lease.RingFiles()
        self._reader = None  # the direct path's cuFile engine; False: none
        self._cufiles = {}  # ring file -> open cuFile file
        self._turn = 0  # the staging half the next copy to a GPU uses
        self._cuda_events = None
        self._whole = wholefile.WholeFiles(self.ctl, cufile) if whole_files else None
        # None: copy from the daemon's shared RAM tier where it has one;
        # False: never (set after the tier's file would not open or register).
        self._ram_direct = ram_direct
        self._ram = ramtier.SharedRAM(self.ctl)
        self.last_path = None
        self.path_stats = {}  # path name -> {"calls": n, "bytes": n}
        self.staging = self.register_buffer(buffer_size) if buffer_size else None

    @property
    def ctl_fd(self):
        return self.ctl.fd

    def close(self):
        self._ram.close()  # its copies finish, its leases are dropped
        self._queue = None  # unregistered with the ctl file below
        self._ring.close()
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
        self.ctl.close()  # the daemon drops our buffers and leases

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- the commands, on the ctl file ------------------------------------------

    def capabilities(self):
        return self.ctl.capabilities()

    def register_shm(self, name, size, fd=None):
        return self.ctl.register_shm(name, size, fd=fd)

    def register_buffer(self, size, fd=None):
        return self.ctl.register_buffer(size, fd=fd)

    def read(self, path, offset, length, buf=None, buf_offset=0):
        """READ length bytes at offset of path into buf (default: staging);
        see Control.read."""
        return self.ctl.read(path, offset, length, buf or self.staging, buf_offset)

    def lease(self, path, offset, length, flags=0):
        return self.ctl.lease(path, offset, length, flags)

    def whole_file(self, path):
        return self.ctl.whole_file(path)

    def batch_available(self):
        """Whether reads go through the batch commands (SUBMIT/WAIT)."""
        if self._batch is None:
            self._batch = self.capabilities().get("abi_version", 1) >= 2
        return self._batch

    def queue(self):
        """The client's batch queue on the ctl file (made on first use)."""
        if self._queue is None:
            entries = self.capabilities().get("batch", {}).get("max_batch", 256)
            self._queue = Queue(self.ctl, entries=min(entries, 256))
        return self._queue

    def ram_leases_available(self):
        """Whether the daemon's RAM tier is shared (LEASE_FROM_RAM)."""
        return self._ram_direct is not False and bool(self.capabilities().get("ram_leases"))

    def whole_files_available(self):
        """Whether the daemon may name whole-shard files (WHOLE_FILE)."""
        caps = self.capabilities()
        return bool(caps.get("whole_files")) and "whole_file" in caps.get("commands", {})

    def whole_file_mode(self):
        """How a whole file is read into a CUDA dst: the cuFile engine's
        mode (a phrase), or None (preads and a copy)."""
        engine = self._whole.cufile_engine() if self._whole is not None else None
        return engine.mode() if engine else None

    def direct_mode(self):
        """How the direct path reads (a phrase), or None when it is not used."""
        reader = self._direct_reader()
        return reader.mode() if reader else None

    # --- read_into --------------------------------------------------------------

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
        if cuda and self._direct_reader():
            try:
                out = _out_view(dst, length)
                return self._note("lease cufile", lease.read_direct(self.ctl, self._direct_reader(), self._cufiles,
                                                                    out, path, offset, length))
            except DirectPathError:
                self._reader = False  # cuFile cannot read the ring here: stop trying
            except OSError as e:
                if e.errno not in (errno.ENODATA, errno.EOPNOTSUPP):
                    raise
        if (not isinstance(path, int) and self.staging is not None and length >= self.PIPELINE_MIN_CHUNKS *
                min(self.chunk_size, self.staging.size) and self.batch_available()):
            return self._read_pipelined(dst, path, offset, length)
        return self._note("read", self._read_staged(dst, path, offset, length))

    def _note(self, name, n):
        self.last_path = name
        st = self.path_stats.setdefault(name, {"calls": 0, "bytes": 0})
        st["calls"] += 1
        st["bytes"] += n
        return n

    def _read_ram(self, dst, path, offset, length, cuda):
        """(bytes, complete): how much of [offset, offset+length) read_into
        copied straight from the shared RAM tier (all of it up to the end of
        the shard: complete; the first part; or none)."""
        if not self.ram_leases_available():
            return 0, False
        out = _out_view(dst, length)
        want = max(0, min(length, self.ctl.size(path) - offset))
        if want == 0:
            return 0, False
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

    def _read_whole(self, dst, path, offset, length, cuda):
        """read_into from the whole-shard file, or None when the shard is
        not held whole or its file does not open (the other paths then)."""
        out = _out_view(dst, length)
        try:
            n, name = self._whole.read(out, path, offset, length, cuda, self.staging, self._copy_engine,
                                       self.chunk_size)
        except (wholefile.Unavailable, OSError):
            return None  # the other paths write all of dst again
        return self._note(name, n)

    def _read_pipelined(self, dst, path, offset, length, engine=None):
        """The batch path, or the lease path where the range is in the
        ring; engine: the copy engine (default: the staging buffer's)."""
        out = _out_view(dst, length)
        rel = self.ctl.rel(path)
        length = max(0, min(length, self.ctl.size(rel) - offset))
        if length == 0:
            return 0
        chunk = min(self.chunk_size, self.staging.size)
        if engine is None:
            engine = self._copy_engine(_is_torch(dst) and dst.is_cuda)
        if not self._ring.refused and self.capabilities().get("leases"):
            # Ring-resident bytes: read by this process from the disk, as
            # fast as the disk goes; RAM-tier bytes: copied by the daemon.
            try:
                return self._note("lease", lease.read_leased(self.ctl, self._ring, self.staging, out, rel, offset,
                                                             length, chunk, engine))
            except lease.NotLeased:
                pass
        return self._note("batch", read_chunks(self.queue(), self.staging, out, rel, offset, length, chunk, engine))

    def _copy_engine(self, cuda):
        """The copy engine out of the staging buffer, made once; a CUDA
        one after the buffer is registered with CUDA."""
        kind = "cuda" if cuda else "host"
        engine = self._engines.get(kind)
        if engine is None:
            if cuda:
                self._pin_staging()
                engine = CudaCopyEngine()
            else:
                engine = HostCopyEngine()
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

    def _direct_reader(self):
        """The direct path's cuFile engine, chosen once; None when it is off."""
        if self._reader is None:
            self._reader = False
            if self.direct is not False and self.capabilities().get("leases"):
                self._reader = cufile.reader(self.direct) or False
        return self._reader or None


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


def _out_view(dst, length):
    """dst as the flat byte view a path writes: numpy for host memory (a
    CPU tensor's too), a uint8 tensor for CUDA memory. ValueError when it
    holds fewer than length bytes."""
    out = _bytes_view(dst)
    if out.shape[0] < length:
        raise ValueError("dst holds %d bytes, %d asked" % (out.shape[0], length))
    if _is_torch(out) and not out.is_cuda:
        out = out.numpy()
    return out
