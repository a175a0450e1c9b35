"""Finding a shardfs mount and its side files.

Every shardfs mount has a hidden directory /.shardfs (never listed by
readdir) holding three files: ctl (JSON capabilities; the GPU client's
ioctls go to it), stats (JSON figures of the mount) and hints (write the
paths a loader opens next, one per line). These helpers find them from any
path inside a mount and say None, never raise, for a directory that is not
one: the datasets read a local copy just as well.
"""

import json
import os
from collections import namedtuple

SIDE_DIR = ".shardfs"

SideFiles = namedtuple("SideFiles", "root ctl stats hints")
SideFiles.__doc__ = "The side files of one mount: root is the mount point, the rest absolute paths."


def side_files(root):
    """The side files of the mount at root, or None when root is not a shardfs mount root."""
    root = os.path.abspath(root)
    side = os.path.join(root, SIDE_DIR)
    files = SideFiles(root, os.path.join(side, "ctl"), os.path.join(side, "stats"), os.path.join(side, "hints"))
    return files if os.path.isfile(files.ctl) else None


def find_mount(path):
    """The SideFiles of the shardfs mount holding path (a file or a directory
    in it, or its root), or None when path is on no shardfs mount."""
    d = os.path.abspath(path)
    if not os.path.isdir(d):
        d = os.path.dirname(d)
    while True:
        found = side_files(d)
        if found is not None:
            return found
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def read_stats(root):
    """The statistics of the mount holding root (what `shardfs stats --json` prints) as a dict."""
    return _read_json(root, "stats")


def capabilities(root):
    """The capabilities of the mount holding root (the JSON of /.shardfs/ctl) as a dict."""
    return _read_json(root, "ctl")


def _read_json(root, name):
    found = find_mount(root)
    if found is None:
        raise FileNotFoundError("%s is not on a shardfs mount (no %s/%s)" % (root, SIDE_DIR, name))
    with open(getattr(found, name), "rb") as f:
        return json.loads(f.read())
