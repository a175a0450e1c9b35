"""The GPU side interface of a shardfs mount: Client.read_into(dst, path,
offset, length) into numpy arrays, pinned or CUDA torch tensors.

Its modules form a tree; each imports only those below it:

    client      Client: composes the paths below and picks one per read
    batch       SUBMIT/WAIT queue and the chunk pipeline    (abi, ctl)
    lease       ring extents read by the client, O_DIRECT or cuFile (abi)
    ramtier     copies out of the daemon's shared RAM tier  (abi, engines)
    wholefile   reads of the cache's whole-shard files      (cufile)
    prefetcher  GPUPrefetcher: the next batch read while one trains
    ctl         Control: the ctl file and the commands      (abi)
    engines     the copy engines' one protocol, host and CUDA
    cufile      the cuFile engines: kvikio, else libcufile (ctypes)
    abi         ioctl numbers and request layouts: the standard library only

The ABI names are importable from here without numpy; Client and the rest
need numpy and are imported on first use.
"""

from .._lazy import lazy
from .abi import (ABI_VERSION, ENTRY_DONE, LEASE, LEASE_DROP, LEASE_FROM_RAM, LEASE_UNLESS_IN_RAM, READ, REGISTER,
                  SUBMIT, SUBMIT_WAIT, UNREGISTER, WAIT, WHOLE_FILE)

_LAZY = {
    "Client": "client",
    "DirectPathError": "lease",
    "GPUPrefetcher": "prefetcher",
    "Control": "ctl",
    "Buffer": "ctl",
    "Lease": "ctl",
    "Extent": "ctl",
    "ENTRY_DTYPE": "batch",
}

__all__ = ["ABI_VERSION", "ENTRY_DONE", "LEASE", "LEASE_DROP", "LEASE_FROM_RAM", "LEASE_UNLESS_IN_RAM", "READ",
           "REGISTER", "SUBMIT", "SUBMIT_WAIT", "UNREGISTER", "WAIT", "WHOLE_FILE", *_LAZY]


__getattr__, __dir__ = lazy(globals(), _LAZY)
