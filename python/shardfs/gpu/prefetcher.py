"""GPUPrefetcher: the next batch read into a CUDA tensor on a background
thread while the caller trains on the current one. It uses only
Client.read_into."""

import errno
import threading


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
