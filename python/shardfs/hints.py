"""Telling a shardfs mount which shards a reader opens next.

A loader that knows its order writes the coming paths, one per line, to
MOUNT/.shardfs/hints; the mount then fetches them while the current shard is
being read. Hints are only an optimization: on a directory that is not a
shardfs mount, or when the write fails, nothing is written and nothing
fails.
"""

import os

from .mount import find_mount


def write_hints(paths, mount=None):
    """Announces paths (absolute, or relative to the mount root) in one write.

    mount is the mount root or any path in it; by default the mount holding
    the first path. Returns the number of paths written (0 when there is no
    mount to tell or the write failed).
    """
    paths = [os.fspath(p) for p in paths]
    if not paths:
        return 0
    found = find_mount(mount if mount is not None else paths[0])
    if found is None:
        return 0
    return _write(found, paths)


def _write(found, paths):
    lines = "".join(os.path.relpath(os.path.abspath(p), found.root) + "\n" if os.path.isabs(p) else p + "\n"
                    for p in paths)
    try:
        with open(found.hints, "w") as f:
            f.write(lines)
    except OSError:
        return 0
    return len(paths)


class Hints:
    """Keeps the next `lookahead` entries of a reader's shard list announced.

    Call advance(i) before opening shards[i]; each call writes only the
    shards not announced yet, so a list is announced once, a few at a time.
    """

    def __init__(self, shards, lookahead):
        self.shards = [os.fspath(s) for s in shards]
        self.lookahead = lookahead
        self.sent = 0
        self.mount = find_mount(self.shards[0]) if self.shards and lookahead > 0 else None

    def advance(self, current):
        """Called before opening shards[current]: keeps `lookahead` shards announced."""
        if self.mount is None:
            return
        upto = min(len(self.shards), current + 1 + self.lookahead)
        if upto <= self.sent:
            return
        batch = [os.path.abspath(s) for s in self.shards[max(self.sent, current + 1):upto]]
        self.sent = upto
        if batch and _write(self.mount, batch) == 0:
            self.mount = None  # a read-only or foreign mount: stop trying
