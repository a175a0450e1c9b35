"""Feed a tiny torch training loop from a shardfs mount through the side
interface: each step reads one batch of raw shard bytes with read_into
(straight into a pinned staging buffer, then to the GPU when there is one)
and trains a small model to predict the next byte.

    python3 examples/train_gpu.py --mount MNT [--steps 50]

Runs on CPU when CUDA is absent.
"""

import argparse
import os
import sys
import time

import shardfs.gpu as gds


def shards(mount):
    out = []
    for dirpath, dirnames, names in os.walk(mount):
        dirnames[:] = [d for d in dirnames if d != ".shardfs"]
        for n in sorted(names):
            p = os.path.join(dirpath, n)
            size = os.path.getsize(p)
            if size > 0:
                out.append((os.path.relpath(p, mount), size))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mount", required=True)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=64, help="sequences per step")
    ap.add_argument("--seq", type=int, default=256, help="bytes per sequence")
    a = ap.parse_args()

    try:
        import torch
    except ImportError:
        print("torch is not installed")
        return 1
    files = shards(a.mount)
    if not files:
        print("no files under", a.mount)
        return 1
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Sequential(torch.nn.Embedding(256, 64), torch.nn.Flatten(),
                                torch.nn.Linear(64 * (a.seq - 1), 256)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step_bytes = a.batch * a.seq
    batch = torch.empty(step_bytes, dtype=torch.uint8, device=device)

    with gds.Client(a.mount, buffer_size=max(step_bytes * 2, 1 << 20)) as client:
        caps = client.capabilities()
        print("shardfs ABI %d, block %d, leases %s, GPUs %d, training on %s" %
              (caps["abi_version"], caps["block_size"], caps["leases"], len(caps["gpus"]), device))
        fi, off, t0, total = 0, 0, time.time(), 0
        for step in range(a.steps):
            path, size = files[fi]
            if off + step_bytes > size:  # next shard (or wrap), like a streaming loader
                fi, off = (fi + 1) % len(files), 0
                path, size = files[fi]
            n = min(step_bytes, size - off)
            got = client.read_into(batch, path, off, n)
            off += got
            total += got
            usable = got // a.seq * a.seq
            if usable == 0:
                continue
            seqs = batch[:usable].view(-1, a.seq).long()
            logits = model(seqs[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits, seqs[:, -1])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 0 or step == a.steps - 1:
                print("step %3d  %-28s off %10d  loss %.3f" % (step, path[-28:], off, loss.item()))
        dt = time.time() - t0
        print("read %d bytes in %d steps, %.2f MB/s including training" % (total, a.steps, total / dt / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
