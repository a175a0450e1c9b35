"""The cuFile path: reads from a file straight into GPU memory, through
kvikio when it is installed, else through libcufile itself (ctypes).

reader(force) picks the engine the lease and whole-file paths read with:
an object with mode() (a phrase) and open(path), whose files read(view,
file_offset) a CUDA tensor view whole and close().

libcufile comes with the CUDA toolkit and with the nvidia-cufile wheel that
PyTorch pulls in. Only what the direct path needs is bound: open the driver,
register a file descriptor, read into device memory, and the driver's
properties, which say whether the nvidia-fs kernel module is loaded. Without
it cuFile still works, in compatibility mode: a POSIX read into a bounce
buffer and a copy to the GPU, no faster than the staged path.

Layouts follow cufile.h (CUfileError_t, CUfileDescr_t, CUfileDrvProps_t).
"""

import ctypes
import ctypes.util
import errno
import glob
import os
import sys

CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1


class _Error(ctypes.Structure):
    _fields_ = [("err", ctypes.c_int), ("cu_err", ctypes.c_int)]


class _DescrHandle(ctypes.Union):
    _fields_ = [("fd", ctypes.c_int), ("handle", ctypes.c_void_p)]


class _Descr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("handle", _DescrHandle), ("fs_ops", ctypes.c_void_p)]


class _NVFS(ctypes.Structure):
    _fields_ = [
        ("major_version", ctypes.c_uint),
        ("minor_version", ctypes.c_uint),
        ("poll_thresh_size", ctypes.c_size_t),
        ("max_direct_io_size", ctypes.c_size_t),
        ("dstatusflags", ctypes.c_uint),
        ("dcontrolflags", ctypes.c_uint),
    ]


class _DrvProps(ctypes.Structure):
    _fields_ = [
        ("nvfs", _NVFS),
        ("fflags", ctypes.c_uint),
        ("max_device_cache_size", ctypes.c_uint),
        ("per_buffer_cache_size", ctypes.c_uint),
        ("max_device_pinned_mem_size", ctypes.c_uint),
        ("max_batch_io_size", ctypes.c_uint),
        ("max_batch_io_timeout_msecs", ctypes.c_uint),
    ]


def nvfs_loaded():
    """Whether the nvidia-fs kernel module, which real GDS needs, is loaded."""
    return os.path.exists("/proc/driver/nvidia-fs/version")


def library_candidates():
    """Where libcufile may be: $SHARDFS_CUFILE_LIB, the loader's path, then
    the nvidia-* wheels on sys.path."""
    env = os.environ.get("SHARDFS_CUFILE_LIB")
    if env:
        return [env]
    names = ["libcufile.so.0", "libcufile.so"]
    found = ctypes.util.find_library("cufile")
    if found:
        names.insert(0, found)
    for root in sys.path:
        for pattern in ("nvidia/cufile/lib/libcufile.so*", "nvidia/cu*/lib/libcufile.so*"):
            names.extend(sorted(glob.glob(os.path.join(root, pattern))))
    return names


class CuFile:
    """An open cuFile driver. Raises OSError(ENOENT) when no libcufile loads
    and OSError(EIO) when the driver does not open."""

    def __init__(self, candidates=None):
        if not nvfs_loaded():
            # cuFile refuses to register files without the module unless
            # compatibility mode is forced; say so before the driver opens.
            os.environ.setdefault("CUFILE_FORCE_COMPAT_MODE", "true")
        self.lib, tried = None, []
        for name in candidates if candidates is not None else library_candidates():
            try:
                self.lib = ctypes.CDLL(name)
                self.path = name
                break
            except OSError as e:
                tried.append("%s (%s)" % (name, e))
        if self.lib is None:
            raise OSError(errno.ENOENT, "no libcufile: tried " + ", ".join(tried or ["nothing"]))
        lib = self.lib
        lib.cuFileDriverOpen.restype = _Error
        lib.cuFileDriverOpen.argtypes = []
        lib.cuFileDriverGetProperties.restype = _Error
        lib.cuFileDriverGetProperties.argtypes = [ctypes.POINTER(_DrvProps)]
        lib.cuFileHandleRegister.restype = _Error
        lib.cuFileHandleRegister.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_Descr)]
        lib.cuFileHandleDeregister.restype = None
        lib.cuFileHandleDeregister.argtypes = [ctypes.c_void_p]
        lib.cuFileRead.restype = ctypes.c_ssize_t
        lib.cuFileRead.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_longlong, ctypes.c_longlong]
        self._check(lib.cuFileDriverOpen(), "cuFileDriverOpen")
        props = _DrvProps()
        self._check(lib.cuFileDriverGetProperties(ctypes.byref(props)), "cuFileDriverGetProperties")
        self.nvfs_version = (props.nvfs.major_version, props.nvfs.minor_version)
        # Without the nvidia-fs module every read is a POSIX read plus a copy.
        self.gds = nvfs_loaded() and os.environ.get("CUFILE_FORCE_COMPAT_MODE", "").lower() != "true"

    def _check(self, status, what):
        if status.err != 0:
            raise OSError(errno.EIO, "%s failed: %s (cuFile error %d, CUDA error %d)"
                          % (what, self.strerror(status.err), status.err, status.cu_err))

    def strerror(self, code):
        f = getattr(self.lib, "cufileop_status_error", None)
        if f is None:
            return "unknown error"
        f.restype, f.argtypes = ctypes.c_char_p, [ctypes.c_int]
        return (f(abs(code)) or b"unknown error").decode(errors="replace")

    def mode(self):
        if self.gds:
            return "GDS (nvidia-fs %d.%d)" % self.nvfs_version
        return "compatibility mode (no nvidia-fs module: POSIX read + copy)"

    def open(self, path):
        return File(self, path)


class File:
    """A file registered with cuFile; O_DIRECT when real GDS can use it."""

    def __init__(self, driver, path):
        self.driver = driver
        flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECT if driver.gds else 0)
        self.fd = os.open(path, flags)
        descr = _Descr(type=CU_FILE_HANDLE_TYPE_OPAQUE_FD)
        descr.handle.fd = self.fd
        self.handle = ctypes.c_void_p()
        try:
            driver._check(driver.lib.cuFileHandleRegister(ctypes.byref(self.handle), ctypes.byref(descr)),
                          "cuFileHandleRegister(%s)" % path)
        except OSError:
            os.close(self.fd)
            raise

    def pread(self, dev_ptr, size, file_offset):
        """Read size bytes at file_offset into device memory at dev_ptr."""
        done = 0
        while done < size:
            n = self.driver.lib.cuFileRead(self.handle, ctypes.c_void_p(dev_ptr), size - done,
                                           file_offset + done, done)
            if n < 0:
                raise OSError(errno.EIO, "cuFileRead at %d: %s (%d)" % (file_offset + done, self.driver.strerror(n), n))
            if n == 0:
                break
            done += n
        return done

    def close(self):
        if self.fd >= 0:
            self.driver.lib.cuFileHandleDeregister(self.handle)
            os.close(self.fd)
            self.fd = -1


class _KvikioReader:
    def __init__(self, kvikio, compat):
        self.kvikio, self.compat = kvikio, compat

    def mode(self):
        return "kvikio, " + ("compatibility mode" if self.compat else "cuFile")

    def open(self, path):
        f = self.kvikio.CuFile(path, "r")

        class _File:
            def read(self, view, file_offset):
                n = view.numel() if hasattr(view, "numel") else view.nbytes
                got = f.pread(view, n, file_offset).get()
                if got != n:
                    raise OSError(errno.EIO, "kvikio read %d of %d bytes at %d" % (got, n, file_offset))

            def close(self):
                f.close()
        return _File()


def kvikio_reader(force):
    """The kvikio engine; None without kvikio, or in compatibility mode
    unless force (a POSIX read and a copy: the staged path is as fast)."""
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
        return None
    return _KvikioReader(kvikio, compat)


class _LibReader:
    def __init__(self, driver):
        self.driver = driver

    def mode(self):
        return "cuFile " + self.driver.mode()

    def open(self, path):
        f = self.driver.open(path)

        class _File:
            def read(self, view, file_offset):
                n = f.pread(view.data_ptr(), view.numel(), file_offset)
                if n != view.numel():
                    raise OSError(errno.EIO, "cuFile read %d of %d bytes at %d" % (n, view.numel(), file_offset))

            def close(self):
                f.close()
        return _File()


def lib_reader(force):
    """The libcufile engine; None when it does not load, or without real
    GDS (the nvidia-fs module) unless force."""
    if not force and not nvfs_loaded():
        return None
    try:
        driver = CuFile()
    except OSError:
        return None
    if not driver.gds and not force:
        return None
    return _LibReader(driver)


def reader(force):
    """kvikio's engine, else libcufile's, else None (see their docs)."""
    return kvikio_reader(force) or lib_reader(force) or None
