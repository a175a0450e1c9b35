"""Small fixtures for the package's tests: tar shards and fake mount roots."""

import hashlib
import io
import json
import os
import tarfile


def write_shard(path, keys, size=1000):
    """Writes a WebDataset-style shard: KEY.cls, KEY.jpg (size bytes), KEY.json per key.
    Returns {key: jpg bytes}."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = {}
    with tarfile.open(path, "w") as tar:
        for i, key in enumerate(keys):
            jpg = hashlib.sha256(key.encode()).digest() * (size // 32 + 1)
            jpg = jpg[:size]
            data[key] = jpg
            meta = json.dumps({"key": key, "cls": i % 7, "jpg_sha256": hashlib.sha256(jpg).hexdigest()}).encode()
            for ext, body in (("cls", str(i % 7).encode()), ("jpg", jpg), ("json", meta)):
                info = tarfile.TarInfo("%s.%s" % (key, ext))
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
    return data


def make_shards(root, n_shards, per_shard, size=1000):
    """n_shards shards under root/train; returns {(relpath, key): jpg bytes}."""
    want = {}
    for s in range(n_shards):
        rel = os.path.join("train", "shard-%04d.tar" % s)
        keys = ["s%04d-%03d" % (s, i) for i in range(per_shard)]
        for key, jpg in write_shard(os.path.join(root, rel), keys, size).items():
            want[(rel, key)] = jpg
    return want


def fake_mount(root):
    """Gives root the side files a shardfs mount has (regular files here)."""
    side = os.path.join(root, ".shardfs")
    os.makedirs(side, exist_ok=True)
    with open(os.path.join(side, "ctl"), "w") as f:
        json.dump({"abi_version": 1}, f)
    with open(os.path.join(side, "stats"), "w") as f:
        json.dump({"reads": 3}, f)
    open(os.path.join(side, "hints"), "w").close()
    return side
