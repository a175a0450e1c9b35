"""Batched READs and the chunk pipeline behind Client.read_into.

A Queue is a small registered buffer holding fixed-size entries (and their
paths): one SUBMIT ioctl starts many READs, the daemon serves them on
several threads and marks each entry done in the shared memory, in any
order; WAIT sleeps until the handle has completed more of them.

read_chunks() splits a large read into chunks, keeps up to one chunk per
staging slot in flight, and hands each chunk to a copy engine as soon as it
lands: CudaCopyEngine starts a non-blocking host-to-device copy on a CUDA
stream, HostCopyEngine copies with numpy. The engine is told when a slot is
about to be refilled (so the copy out of it must be over) and waited on once
at the end.

GPUPrefetcher fills the next batch's GPU tensor on a background thread while
the caller trains on the current one.
"""

import errno
import os
import threading

import numpy as np

from . import gpu as _gpu


class Queue:
    """Up to `entries` batched READs in flight on one fd of a Client."""

    PATH_AREA = 64 << 10

    def __init__(self, client, entries=256, fd=None):
        self.client = client
        self.fd = client.ctl_fd if fd is None else fd
        self.n = entries
        self.paths_at = entries * _gpu.ENTRY_DTYPE.itemsize
        self.buf = client.register_buffer(self.paths_at + self.PATH_AREA, fd=fd)
        self.entries = np.frombuffer(self.buf.mm, _gpu.ENTRY_DTYPE, count=entries)
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
            if len(b) >= _gpu.PATH_SIZE:
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
        req = _gpu._SUBMIT.pack(_gpu.ABI_VERSION, 0, self.buf.id, first * _gpu.ENTRY_DTYPE.itemsize, count, 0, 0, 0)
        while True:
            try:
                out = self.client._ioctl(self.fd, _gpu.SUBMIT, req)
                break
            except InterruptedError:
                continue
        self.completed = max(self.completed, _gpu._SUBMIT.unpack(out)[7])
        if wait:
            slots = range(first, first + count)
            while not all(self.entries["state"][s] == _gpu.ENTRY_DONE for s in slots):
                self.wait()

    def wait(self, timeout_ms=1000):
        """Sleep until the handle completes one more entry than last seen."""
        req = _gpu._WAIT.pack(_gpu.ABI_VERSION, 0, self.completed + 1, timeout_ms, 0, 0)
        try:
            out = self.client._ioctl(self.fd, _gpu.WAIT, req)
        except InterruptedError:
            return  # a signal: the caller looks at the entries and waits again
        self.completed = max(self.completed, _gpu._WAIT.unpack(out)[5])

    def reap(self):
        """The entries that completed since the last reap, as (slot,
        user_data, result) with result the bytes read or -errno; their slots
        are free again."""
        if not self.busy:
            return []
        busy = np.fromiter(self.busy, np.int64, len(self.busy))
        done = busy[self.entries["state"][busy] == _gpu.ENTRY_DONE]
        out = [(int(s), int(self.entries["user_data"][s]), int(self.entries["result"][s])) for s in done]
        for s, _, _ in out:
            self.busy.discard(s)
            self.free.append(s)
        return out

    def close(self):
        self.buf.unregister()


class HostCopyEngine:
    """Copies chunks with numpy (dst in host memory); also the fake engine
    the pipeline's tests drive."""

    def __init__(self, record=True):
        # (dst_offset, nbytes, slot), in the order started; not kept by a
        # client's own engine, which lives as long as the client.
        self.copies = [] if record else None

    def copy(self, out, at, src, slot):
        if self.copies is not None:
            self.copies.append((at, src.shape[0], slot))
        out[at:at + src.shape[0]] = src

    def reuse(self, slot):
        pass

    def finish(self):
        pass


class CudaCopyEngine:
    """Non-blocking host-to-device copies out of a registered (pinned)
    staging buffer on one CUDA stream, an event per staging slot."""

    def __init__(self, slots):
        import torch

        self.torch = torch
        self.stream = torch.cuda.Stream()
        self.events = [None] * slots

    def copy(self, out, at, src, slot):
        torch = self.torch
        with torch.cuda.stream(self.stream):
            out[at:at + src.shape[0]].copy_(torch.from_numpy(src), non_blocking=True)
            ev = self.events[slot] = torch.cuda.Event()
            ev.record(self.stream)

    def reuse(self, slot):
        ev = self.events[slot]
        if ev is not None:
            ev.synchronize()
            self.events[slot] = None

    def finish(self):
        self.stream.synchronize()
        # Later work on the caller's stream sees the bytes.
        self.torch.cuda.current_stream().wait_stream(self.stream)


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


class GPUPrefetcher:
    """Iterates over batches read into CUDA tensors, reading batch i+1 on a
    background thread while the caller uses batch i.

        reqs = [[("train/shard-000.tar", 0, 8 << 20)], ...]   # per batch: (path, offset, length)...
        for tensor in GPUPrefetcher(client, reqs, device="cuda"):
            train_step(tensor)

    Each batch is one flat uint8 tensor of the batch's total length; two are
    kept and reused, so a caller that keeps a batch must clone it.
    """

    def __init__(self, client, batches, device="cuda"):
        self.client, self.batches, self.device = client, list(batches), device

    def __iter__(self):
        import torch

        if not self.batches:
            return
        size = max(sum(r[2] for r in b) for b in self.batches)
        bufs = [torch.empty(size, dtype=torch.uint8, device=self.device) for _ in range(2)]
        result = {}

        def fill(i):
            try:
                at = 0
                for path, offset, length in self.batches[i]:
                    n = self.client.read_into(bufs[i % 2][at:at + length], path, offset, length)
                    if n != length:
                        raise OSError(errno.EIO, "%s: %d of %d bytes at %d" % (path, n, length, offset))
                    at += length
                result[i] = at
            except BaseException as e:  # re-raised on the caller's thread
                result[i] = e

        worker = threading.Thread(target=fill, args=(0,), daemon=True)
        worker.start()
        for i in range(len(self.batches)):
            worker.join()
            got = result.pop(i)
            if isinstance(got, BaseException):
                raise got
            if i + 1 < len(self.batches):
                worker = threading.Thread(target=fill, args=(i + 1,), daemon=True)
                worker.start()
            yield bufs[i % 2][:got]


class NotLeased(Exception):
    """The range is not read from the ring by the client itself: the READ
    path serves it (in the RAM tier, not cached, or the ring file closed to
    this process)."""


def read_leased(client, staging, out, rel, offset, length, chunk, engine, unless_in_ram=True):
    """Reads a ring-resident range the way the disk is fastest: the client
    LEASEs each chunk's ring extents and reads them itself with O_DIRECT into
    its staging buffer, in as few requests as the extents allow, then hands
    the chunk to engine. The daemon copies nothing; the lease keeps the
    slots from being reused until the chunk is read.

    Raises NotLeased before reading anything when the first chunk is in the
    RAM tier (READ copies it from memory faster; unless_in_ram=False leases
    it all the same) or cannot be leased; a later chunk that cannot be
    leased is READ by the daemon instead."""
    align = client.capabilities().get("alignment", 4096)
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
            lease = client.lease(rel, offset + done, n, flags=_gpu.LEASE_UNLESS_IN_RAM if unless_in_ram else 0)
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
                    _read_extents(client, staging, at, offset + done, lease.extents, align)
                except PermissionError as e:
                    client._ring_direct = False
                    if done == 0:
                        raise NotLeased(str(e))
                    raise
                covered = lease.covered
        if covered < n:  # the rest of the chunk through the daemon
            got = client.read(rel, offset + done + covered, n - covered, staging, at + covered)
            if got != n - covered:
                raise OSError(errno.EIO, "%s at %d: %d of %d bytes" % (rel, offset + done + covered, got, n - covered))
        engine.copy(out, done, staging.array[at:at + n], slot)
        done += n
        k += 1
    engine.finish()
    return length


def _read_extents(client, staging, at, file_offset, extents, align):
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
        fd = client._ring_fd(path)
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
