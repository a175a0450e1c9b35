"""Copy engines: how bytes that landed in host memory reach read_into's
destination.

Every path that lands bytes in host memory first (the staging buffer of
the batch, lease and whole-file paths; the mapped shared RAM tier) hands
each piece to an engine, one protocol for all:

    copy(out, at, src, slot, last=True)
                              start copying src (a flat uint8 numpy view, or a
                              slice of what source() made) to
                              out[at:at + len(src)]; slot names the memory src
                              lies in (a staging slot, a RAM-tier lease); last
                              False: more copies out of slot follow at once,
                              and only the last one need mark the slot
    source(array)             what copies out of slices of array take: made
                              once by an owner that copies many pieces of it
    reuse(slot)               wait until every copy out of slot has finished,
                              before the slot is refilled or released
    done(slot)                whether they have, without waiting
    finish()                  wait until every copy started has finished

HostCopyEngine copies with numpy, at once. CudaCopyEngine starts
non-blocking host-to-device copies and records an event per slot, on a
CUDA stream of its own (finish() then also orders the caller's current
stream after it) or on the caller's current stream (stream=None: the
copies are ordered with the caller's other work, as a non-blocking
tensor.copy_ is). A CUDA copy is DMA only when its source memory is
registered with CUDA: the owner of that memory registers it, not the
engine.

This module imports nothing of the package.
"""

import warnings


class HostCopyEngine:
    """Copies with numpy (dst in host memory), done at once; with record,
    also the fake engine the paths' tests drive."""

    def __init__(self, record=False):
        # (dst_offset, nbytes, slot), in the order started; not kept by a
        # client's own engine, which lives as long as the client.
        self.copies = [] if record else None

    def source(self, array):
        return array

    def copy(self, out, at, src, slot, last=True):
        if self.copies is not None:
            self.copies.append((at, src.shape[0], slot))
        out[at:at + src.shape[0]] = src

    def reuse(self, slot):
        pass

    def done(self, slot):
        return True

    def finish(self):
        pass


class CudaCopyEngine:
    """Non-blocking host-to-device copies, an event per slot recorded after
    the slot's last copy. own_stream: on a CUDA stream of the engine's;
    else on the caller's current stream."""

    def __init__(self, own_stream=True):
        import torch

        self.torch = torch
        self.stream = torch.cuda.Stream() if own_stream else None
        self.events = {}  # slot -> the event after its last copy

    def source(self, array):
        """A tensor over array, made once: a copy of many pieces then slices
        it, which costs a fraction of a tensor made per piece."""
        with warnings.catch_warnings():
            # A read-only source (the RAM tier's mapping): torch only reads it.
            warnings.simplefilter("ignore")
            return self.torch.from_numpy(array)

    def copy(self, out, at, src, slot, last=True):
        torch = self.torch
        if not isinstance(src, torch.Tensor):
            src = self.source(src)
        n = src.shape[0]
        if self.stream is None:
            # The caller's current stream: no stream switch per copy.
            stream = torch.cuda.current_stream()
            out[at:at + n].copy_(src, non_blocking=True)
        else:
            stream = self.stream
            with torch.cuda.stream(stream):
                out[at:at + n].copy_(src, non_blocking=True)
        if last:
            # Copies on one stream finish in order: the event after a
            # slot's last copy passes once all of them have.
            ev = self.events[slot] = torch.cuda.Event()
            ev.record(stream)

    def reuse(self, slot):
        ev = self.events.pop(slot, None)
        if ev is not None:
            ev.synchronize()

    def done(self, slot):
        ev = self.events.get(slot)
        if ev is None or ev.query():
            self.events.pop(slot, None)
            return True
        return False

    def finish(self):
        for slot in list(self.events):
            self.reuse(slot)
        if self.stream is not None:
            self.stream.synchronize()
            # Later work on the caller's stream sees the bytes.
            self.torch.cuda.current_stream().wait_stream(self.stream)
