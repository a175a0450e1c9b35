"""The control-file client: one open /.shardfs/ctl of a mount and the
commands of the ABI sent on it (or on a shard's fd).

Control knows the commands one at a time: capabilities, REGISTER and
UNREGISTER of /dev/shm buffers, READ, LEASE and LEASE_DROP, WHOLE_FILE.
It keeps no state of reads; the paths built on it (batch, lease, RAM
tier, whole file) and the Client that composes them do.
"""

import errno
import fcntl
import json
import mmap
import os
import secrets

import numpy as np

from . import abi


def ioctl(fd, cmd, payload):
    """Sends cmd with payload on fd; returns the payload as the daemon left it."""
    buf = bytearray(payload)
    fcntl.ioctl(fd, cmd, buf, True)
    return buf


class Buffer:
    """A /dev/shm buffer registered with the daemon on one fd (the ctl file
    or a shard's fd); only READs on that fd may use it."""

    def __init__(self, ctl, buf_id, size, mm, fd=None):
        self.ctl, self.id, self.size, self.mm = ctl, buf_id, size, mm
        self.fd = ctl.fd if fd is None else fd
        self.array = np.frombuffer(mm, dtype=np.uint8)  # zero-copy view
        self.host_registered = False  # cudaHostRegister done

    def unregister(self):
        if self.id is not None:
            ioctl(self.fd, abi.UNREGISTER, abi.UNREGISTER_REQ.pack(abi.ABI_VERSION, 0, self.id))
            self.id = None


class Extent:
    __slots__ = ("path", "cache_offset", "length", "file_offset")

    def __init__(self, path, cache_offset, length, file_offset):
        self.path, self.cache_offset, self.length, self.file_offset = path, cache_offset, length, file_offset

    def __repr__(self):
        return "Extent(%s@%d+%d -> %d)" % (self.path, self.cache_offset, self.length, self.file_offset)


class Lease:
    """Cache extents pinned until drop() (or until the ctl file closes)."""

    def __init__(self, ctl, lease_id, covered, extents):
        self.ctl, self.id, self.covered, self.extents = ctl, lease_id, covered, extents

    def drop(self):
        if self.id is not None:
            ioctl(self.ctl.fd, abi.LEASE_DROP, abi.LEASE_DROP_REQ.pack(abi.ABI_VERSION, 0, self.id))
            self.id = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.drop()


class Control:
    """The ctl file of the mount at `mount`, open until close()."""

    def __init__(self, mount, shm_dir="/dev/shm"):
        self.mount = os.path.abspath(mount)
        self.shm_dir = shm_dir
        self._caps = None
        self.fd = os.open(os.path.join(self.mount, ".shardfs", "ctl"), os.O_RDONLY | os.O_CLOEXEC)

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)  # the daemon drops our buffers and leases
            self.fd = -1

    def rel(self, path):
        """A path relative to the mount root (absolute paths under it
        accepted); "" for a shard's fd."""
        if isinstance(path, int):
            return ""
        p = os.fspath(path)
        if os.path.isabs(p):
            p = os.path.relpath(os.path.abspath(p), self.mount)
            if p.startswith(".."):
                raise ValueError("%s is not under %s" % (path, self.mount))
        return p

    def size(self, path):
        """The size of path (relative, absolute under the mount, or a shard's fd)."""
        if isinstance(path, int):
            return os.fstat(path).st_size
        return os.stat(os.path.join(self.mount, self.rel(path))).st_size

    def _fd_for(self, path):
        return path if isinstance(path, int) else self.fd

    def capabilities(self):
        if self._caps is None:
            with open(os.path.join(self.mount, ".shardfs", "ctl"), "rb") as f:
                self._caps = json.loads(f.read())
            if self._caps.get("min_abi_version", 1) > abi.ABI_VERSION:
                raise OSError(errno.EPROTO, "shardfs ABI %s..%s, client speaks %d" % (
                    self._caps.get("min_abi_version"), self._caps.get("abi_version"), abi.ABI_VERSION))
        return self._caps

    def register_shm(self, name, size, fd=None):
        """REGISTER an existing /dev/shm file by name on fd (default: the
        ctl file); returns the buffer id."""
        req = abi.REGISTER_REQ.pack(abi.ABI_VERSION, 0, size, 0, abi.cstr(name, abi.SHM_NAME_SIZE))
        out = ioctl(self.fd if fd is None else fd, abi.REGISTER, req)
        return abi.REGISTER_REQ.unpack(out)[3]

    def register_buffer(self, size, fd=None):
        """Create a 0600 /dev/shm file of size bytes, register it on fd
        (default: the ctl file) and map it.

        The name is unlinked once registered: the daemon and this process
        hold the memory, and nothing is left behind in /dev/shm.
        """
        name = "shardfs-%d-%s" % (os.getpid(), secrets.token_hex(8))
        path = os.path.join(self.shm_dir, name)
        shm = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(shm, 0o600)  # exact mode, whatever the umask
            os.ftruncate(shm, size)
            mm = mmap.mmap(shm, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            buf_id = self.register_shm(name, size, fd=fd)
        finally:
            os.unlink(path)
            os.close(shm)
        return Buffer(self, buf_id, size, mm, fd=fd)

    def read(self, path, offset, length, buf, buf_offset=0):
        """READ length bytes at offset of path into the registered buf.

        path is relative to the mount root, absolute under it, or an open
        fd of a shard in the mount (then buf must be registered on that fd).
        Returns the bytes read (short at EOF).
        """
        req = abi.READ_REQ.pack(abi.ABI_VERSION, 0, offset, length, buf.id if buf.id is not None else 0,
                                buf_offset, 0, abi.cstr(self.rel(path), abi.PATH_SIZE))
        return abi.READ_REQ.unpack(ioctl(self._fd_for(path), abi.READ, req))[6]

    def lease(self, path, offset, length, flags=0):
        """LEASE: pin the cache extents holding [offset, offset+covered).
        flags LEASE_UNLESS_IN_RAM: ENODATA when the range is all in RAM;
        LEASE_FROM_RAM: extents in the shared RAM tier's file."""
        req = bytearray(abi.LEASE_SIZE)
        abi.LEASE_HEAD.pack_into(req, 0, abi.ABI_VERSION, flags, offset, length, 0, 0, 0, 0,
                                 abi.cstr(self.rel(path), abi.PATH_SIZE))
        out = ioctl(self._fd_for(path), abi.LEASE, req)
        _, _, _, _, lease_id, covered, n_ext, n_paths, _ = abi.LEASE_HEAD.unpack_from(out, 0)
        if n_ext > abi.MAX_LEASE_EXTENTS or n_paths > abi.MAX_LEASE_PATHS:
            raise OSError(errno.EPROTO, "malformed LEASE reply")
        at = abi.LEASE_PATHS_AT
        paths = [bytes(out[at + i * abi.PATH_SIZE:at + (i + 1) * abi.PATH_SIZE]).split(b"\0", 1)[0].decode()
                 for i in range(n_paths)]
        extents = []
        for i in range(n_ext):
            idx, _, cache_off, n, file_off = abi.EXTENT.unpack_from(out, abi.LEASE_EXTENTS_AT + i * abi.EXTENT.size)
            extents.append(Extent(paths[idx], cache_off, n, file_off))
        return Lease(self, lease_id, covered, extents)

    def whole_file(self, path):
        """WHOLE_FILE: (file, size) of the cache's whole-shard file of path
        (relative, absolute under the mount, or a shard's fd). OSError
        ENODATA: not held whole; EACCES: this uid could not open it;
        EOPNOTSUPP: no whole-shard files; ENOTTY: an older daemon."""
        req = abi.WHOLE_REQ.pack(abi.ABI_VERSION, 0, 0, abi.cstr(self.rel(path), abi.PATH_SIZE), b"")
        _, _, size, _, file = abi.WHOLE_REQ.unpack(ioctl(self._fd_for(path), abi.WHOLE_FILE, req))
        return file.split(b"\0", 1)[0].decode(), size
