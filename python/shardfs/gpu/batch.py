"""The batch path: READs started many at a time, behind Client.read_into.

A Queue is a small registered buffer holding fixed-size entries (and their
paths): one SUBMIT ioctl starts many READs, the daemon serves them on
several threads and marks each entry done in the shared memory, in any
order; WAIT sleeps until the handle has completed more of them.

read_chunks() splits a large read into chunks, keeps up to one chunk per
staging slot in flight, and hands each chunk to a copy engine (engines.py)
as soon as it lands. The engine is told when a slot is about to be
refilled (so the copy out of it must be over) and waited on once at the
end.
"""

import errno
import os

import numpy as np

from . import abi
from .ctl import ioctl

# One queue entry as numpy sees it (abi.ENTRY_FIELDS, little endian).
ENTRY_DTYPE = np.dtype([(name, "<" + {"Q": "u8", "q": "i8", "I": "u4"}[f]) for name, f in abi.ENTRY_FIELDS])
assert ENTRY_DTYPE.itemsize == abi.ENTRY.size


class Queue:
    """Up to `entries` batched READs in flight on one fd of a Control."""

    PATH_AREA = 64 << 10

    def __init__(self, ctl, entries=256, fd=None):
        self.fd = ctl.fd if fd is None else fd
        self.n = entries
        self.paths_at = entries * ENTRY_DTYPE.itemsize
        self.buf = ctl.register_buffer(self.paths_at + self.PATH_AREA, fd=fd)
        self.entries = np.frombuffer(self.buf.mm, ENTRY_DTYPE, count=entries)
        self.raw = self.buf.array
        self.free = list(range(entries - 1, -1, -1))
        self.busy = set()
        self.completed = 0  # the handle's completions, as last reported
        self._paths = {}  # path -> (offset, length) in the path area
        self._path_end = 0

    def _path(self, rel):
        if rel == "":
            return 0, 0
        got = self._paths.get(rel)
        if got is None:
            b = rel.encode()
            if len(b) >= abi.PATH_SIZE:
                raise ValueError("path of %d bytes" % len(b))
            if self._path_end + len(b) > self.PATH_AREA:
                if self.busy:
                    raise OSError(errno.ENOSPC, "queue path area full")
                self._paths.clear()
                self._path_end = 0
            at = self.paths_at + self._path_end
            self.raw[at:at + len(b)] = np.frombuffer(b, np.uint8)
            got = self._paths[rel] = (at, len(b))
            self._path_end += len(b)
        return got

    def submit(self, requests, wait=False):
        """Start READs; requests are (path, offset, length, buf, buf_offset,
        user_data) tuples, path relative to the mount ("" on a shard's fd).
        Returns the entry index of each. Raises OSError EAGAIN when the
        daemon's bounds refuse them (WAIT, then submit again)."""
        if len(requests) > len(self.free):
            raise OSError(errno.EAGAIN, "%d requests, %d free entries" % (len(requests), len(self.free)))
        slots = sorted(self.free.pop() for _ in requests)
        for slot, (path, offset, length, buf, buf_offset, user_data) in zip(slots, requests):
            path_off, path_len = self._path(path)
            self.entries[slot] = (user_data, offset, length, buf.id, buf_offset, path_off, path_len, 0, 0, 0)
        try:
            # Entries of one SUBMIT are contiguous: one ioctl per run of slots.
            start = 0
            for i in range(1, len(slots) + 1):
                if i == len(slots) or slots[i] != slots[i - 1] + 1:
                    self._submit_run(slots[start], i - start, wait)
                    self.busy.update(slots[start:i])
                    start = i
        except OSError:
            self.free.extend(s for s in slots if s not in self.busy)
            raise
        return slots

    def _submit_run(self, first, count, wait):
        # Never SUBMIT_WAIT: a signal would cut such a SUBMIT short with
        # EINTR, and the caller could not tell whether its entries had
        # started. A SUBMIT that returns at once fails with EINTR only
        # before the daemon saw it, and is sent again.
        req = abi.SUBMIT_REQ.pack(abi.ABI_VERSION, 0, self.buf.id, first * ENTRY_DTYPE.itemsize, count, 0, 0, 0)
        while True:
            try:
                out = ioctl(self.fd, abi.SUBMIT, req)
                break
            except InterruptedError:
                continue
        self.completed = max(self.completed, abi.SUBMIT_REQ.unpack(out)[7])
        if wait:
            slots = range(first, first + count)
            while not all(self.entries["state"][s] == abi.ENTRY_DONE for s in slots):
                self.wait()

    def wait(self, timeout_ms=1000):
        """Sleep until the handle completes one more entry than last seen."""
        req = abi.WAIT_REQ.pack(abi.ABI_VERSION, 0, self.completed + 1, timeout_ms, 0, 0)
        try:
            out = ioctl(self.fd, abi.WAIT, req)
        except InterruptedError:
            return  # a signal: the caller looks at the entries and waits again
        self.completed = max(self.completed, abi.WAIT_REQ.unpack(out)[5])

    def reap(self):
        """The entries that completed since the last reap, as (slot,
        user_data, result) with result the bytes read or -errno; their slots
        are free again."""
        if not self.busy:
            return []
        busy = np.fromiter(self.busy, np.int64, len(self.busy))
        done = busy[self.entries["state"][busy] == abi.ENTRY_DONE]
        out = [(int(s), int(self.entries["user_data"][s]), int(self.entries["result"][s])) for s in done]
        for s, _, _ in out:
            self.busy.discard(s)
            self.free.append(s)
        return out

    def close(self):
        self.buf.unregister()


def read_chunks(queue, staging, out, rel, offset, length, chunk, engine, fd_shard=False):
    """Reads [offset, offset+length) of rel into out (a flat byte view)
    through staging (a registered Buffer) in chunks, up to one per staging
    slot in flight, each handed to engine as it lands. The range must lie
    inside the file (the caller clips it): a short chunk is an error."""
    slots = max(1, min(staging.size // chunk, queue.n))
    nchunks = -(-length // chunk) if length else 0
    free = list(range(slots - 1, -1, -1))
    pending = 0  # chunks submitted, not reaped
    nxt = 0
    while nxt < nchunks or pending:
        batch = []
        while free and nxt < nchunks:
            slot = free.pop()
            engine.reuse(slot)  # the copy out of this slot has finished
            at = nxt * chunk
            n = min(chunk, length - at)
            batch.append(("" if fd_shard else rel, offset + at, n, staging, slot * chunk, (nxt << 16) | slot))
            nxt += 1
        if batch:
            queue.submit(batch)
            pending += len(batch)
        reaped = queue.reap()
        if not reaped:
            queue.wait()
            continue
        for _, user, result in reaped:
            pending -= 1
            idx, slot = user >> 16, user & 0xFFFF
            want = min(chunk, length - idx * chunk)
            if result != want:
                _drain(queue, pending)
                err = -result if result < 0 else errno.EIO
                raise OSError(err, "%s at %d: %s (%d of %d bytes)" % (rel, offset + idx * chunk, os.strerror(err),
                                                                      max(result, 0), want))
            engine.copy(out, idx * chunk, staging.array[slot * chunk:slot * chunk + result], slot)
            free.append(slot)
    engine.finish()
    return length


def _drain(queue, pending):
    """Waits for the entries still in flight, so no READ writes into the
    staging buffer after the caller has moved on."""
    while pending > 0:
        got = queue.reap()
        pending -= len(got)
        if not got:
            queue.wait()
