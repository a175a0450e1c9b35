"""The GPU side interface's ABI: ioctl numbers and request layouts.

gds/abi.go, gds/abi_batch.go and gds/abi_whole.go are the reference:
restricted ioctls of type 0xBD on the ctl file /.shardfs/ctl (path in the
struct) or on a shard's fd (path ignored); little-endian fixed-size structs
that start with u32 version and u32 flags. Errors arrive as OSError with
the errno documented in gds/errno.go.

This module imports nothing of the package and only the standard library,
so every other module of the client can use it.
"""

import struct

ABI_VERSION = 3  # 2 added the batch commands (SUBMIT, WAIT), 3 LEASE_FROM_RAM; READ and the rest still take 1
IOCTL_TYPE = 0xBD
SHM_NAME_SIZE = 256
PATH_SIZE = 1024
MAX_LEASE_EXTENTS = 64
MAX_LEASE_PATHS = 4

IOC_WRITE, IOC_READ = 1, 2


def ioc(direction, nr, size):
    """Linux's generic ioctl encoding (x86, arm64, riscv) of command nr."""
    return (direction << 30) | (size << 16) | (IOCTL_TYPE << 8) | nr


HEADER = "<II"  # version, flags
REGISTER_REQ = struct.Struct(HEADER + "QQ%ds" % SHM_NAME_SIZE)  # size, buf_id, name
UNREGISTER_REQ = struct.Struct(HEADER + "Q")  # buf_id
READ_REQ = struct.Struct(HEADER + "QQQQQ%ds" % PATH_SIZE)  # off, len, buf_id, buf_off, bytes_read, path
LEASE_HEAD = struct.Struct(HEADER + "QQQQII%ds" % PATH_SIZE)  # off, len, lease_id, covered, n_ext, n_paths, path
EXTENT = struct.Struct("<IIQQQ")  # path_index, reserved, cache_offset, length, file_offset
LEASE_SIZE = LEASE_HEAD.size + MAX_LEASE_EXTENTS * EXTENT.size + MAX_LEASE_PATHS * PATH_SIZE
LEASE_EXTENTS_AT = LEASE_HEAD.size
LEASE_PATHS_AT = LEASE_HEAD.size + MAX_LEASE_EXTENTS * EXTENT.size
LEASE_DROP_REQ = struct.Struct(HEADER + "Q")  # lease_id
SUBMIT_REQ = struct.Struct(HEADER + "QQIIQQ")  # queue_buf_id, entries_off, count, reserved, accepted, completed
WAIT_REQ = struct.Struct(HEADER + "QIIQ")  # target, timeout_ms, reserved, completed
WHOLE_REQ = struct.Struct(HEADER + "Q%ds%ds" % (PATH_SIZE, PATH_SIZE))  # size (out), path, file (out)

SUBMIT_WAIT = 1  # SUBMIT flag: return once every entry has completed
LEASE_UNLESS_IN_RAM = 1  # LEASE flag: ENODATA when the whole range is in the RAM tier
LEASE_FROM_RAM = 2  # LEASE flag (ABI 3): extents in the shared RAM tier's file; ENODATA when not all there
ENTRY_DONE = 1  # an entry's state word once the daemon wrote its result

# One batch queue entry, in order: (name, struct format). The daemon
# writes result and state; the rest is the client's.
ENTRY_FIELDS = (("user_data", "Q"), ("file_offset", "Q"), ("length", "Q"), ("buf_id", "Q"), ("buf_offset", "Q"),
                ("path_off", "I"), ("path_len", "I"), ("result", "q"), ("state", "I"), ("reserved", "I"))
ENTRY = struct.Struct("<" + "".join(f for _, f in ENTRY_FIELDS))

REGISTER = ioc(IOC_READ | IOC_WRITE, 1, REGISTER_REQ.size)
UNREGISTER = ioc(IOC_WRITE, 2, UNREGISTER_REQ.size)
READ = ioc(IOC_READ | IOC_WRITE, 3, READ_REQ.size)
LEASE = ioc(IOC_READ | IOC_WRITE, 4, LEASE_SIZE)
LEASE_DROP = ioc(IOC_WRITE, 5, LEASE_DROP_REQ.size)
SUBMIT = ioc(IOC_READ | IOC_WRITE, 6, SUBMIT_REQ.size)
WAIT = ioc(IOC_READ | IOC_WRITE, 7, WAIT_REQ.size)
# Announced by the capabilities (commands.whole_file), not by the ABI version.
WHOLE_FILE = ioc(IOC_READ | IOC_WRITE, 8, WHOLE_REQ.size)

# Every command, by the name gds/abi*.go's golden table gives it.
COMMANDS = {"register": REGISTER, "unregister": UNREGISTER, "read": READ, "lease": LEASE, "lease_drop": LEASE_DROP,
            "submit": SUBMIT, "wait": WAIT, "whole_file": WHOLE_FILE}


def cstr(s, size):
    """s as the bytes of a NUL-padded field of size bytes; ValueError when
    it does not fit or holds a NUL."""
    b = s.encode() if isinstance(s, str) else bytes(s)
    if len(b) >= size or b"\0" in b:
        raise ValueError("%r does not fit a %d-byte field" % (s, size))
    return b
