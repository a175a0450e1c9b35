"""TarShards and TarIndexDataset over shards written here: every sample once, bytes equal."""

import os
import tempfile
import unittest

import shardfs
from helpers import fake_mount, make_shards

try:
    import torch
    from torch.utils.data import DataLoader
except ImportError:
    torch = None


class DatasetsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.root = cls.tmp.name
        cls.want = make_shards(cls.root, n_shards=6, per_shard=5)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check(self, samples):
        got = {}
        for s in samples:
            ident = (os.path.relpath(s["__shard__"], self.root), s["__key__"])
            self.assertNotIn(ident, got, "sample seen twice")
            self.assertEqual(s["json"]["key"], s["__key__"])
            self.assertIsInstance(s["cls"], int)
            got[ident] = bytes(s["jpg"])
        self.assertEqual(sorted(got), sorted(self.want))
        for ident, jpg in got.items():
            self.assertEqual(jpg, self.want[ident], "bytes of %s differ" % (ident,))

    def test_find_shards_sorted_and_skips_side_dir(self):
        with tempfile.TemporaryDirectory() as root:
            want = make_shards(root, n_shards=3, per_shard=1)
            fake_mount(root)
            open(os.path.join(root, ".shardfs", "hidden.tar"), "w").close()
            shards = shardfs.find_shards(root)
            self.assertEqual([os.path.relpath(s, root) for s in shards], sorted({rel for rel, _ in want}))

    def test_split_key(self):
        self.assertEqual(shardfs.split_key("a/b/k001.seg.png"), ("a/b/k001", "seg.png"))
        self.assertEqual(shardfs.split_key("k.jpg"), ("k", "jpg"))

    def test_iterable_ranks_cover_everything_once(self):
        samples = []
        for rank in range(3):
            samples += list(shardfs.TarShards(self.root, rank=rank, world_size=3, hint_lookahead=0))
        self.check(samples)

    def test_iterable_rank_out_of_range(self):
        with self.assertRaisesRegex(ValueError, "rank 3 is not in"):
            shardfs.TarShards(self.root, rank=3, world_size=3)

    def test_iterable_shuffle_is_same_on_every_rank(self):
        a = shardfs.TarShards(self.root, shuffle_seed=7)
        b = shardfs.TarShards(self.root, shuffle_seed=7)
        a.set_epoch(1)
        b.set_epoch(1)
        self.assertEqual(a.worker_shards(), b.worker_shards())
        b.set_epoch(2)
        self.assertNotEqual(a.worker_shards(), b.worker_shards())

    @unittest.skipIf(torch is None, "torch not installed")
    def test_iterable_dataloader_workers(self):
        loader = DataLoader(shardfs.TarShards(self.root, hint_lookahead=0), batch_size=None, num_workers=2)
        self.check(loader)

    def test_map_style_saved_index(self):
        index = os.path.join(self.root, "index.json")
        ds = shardfs.TarIndexDataset(self.root, index_path=index)
        self.assertEqual(len(ds), len(self.want))
        self.check(ds[i] for i in range(len(ds)))
        mtime = os.stat(index).st_mtime_ns
        again = shardfs.TarIndexDataset(self.root, index_path=index)  # read back, not rebuilt
        self.assertEqual(os.stat(index).st_mtime_ns, mtime)
        self.check(again[i] for i in range(len(again)))
        os.remove(index)

    @unittest.skipIf(torch is None, "torch not installed")
    def test_map_style_dataloader_shuffled(self):
        ds = shardfs.TarIndexDataset(self.root)
        self.check(DataLoader(ds, batch_size=None, shuffle=True, num_workers=2))


class ServedIndexTest(unittest.TestCase):
    """On a mount, TarIndexDataset reads each shard's index from /.shardfs/index, not the tar."""

    def test_map_style_uses_the_served_index(self):
        import json
        from unittest import mock

        from shardfs import mapstyle

        with tempfile.TemporaryDirectory() as root:
            want = make_shards(root, n_shards=3, per_shard=4)
            side = fake_mount(root)
            expected = {}
            for rel in sorted({rel for rel, _ in want}):
                expected[rel] = shardfs.index_shard(os.path.join(root, rel))  # from tarfile: no index yet
                path = os.path.join(side, "index", rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    for name, offset, size in mapstyle.tar_members(os.path.join(root, rel)):
                        f.write(json.dumps({"name": name, "offset": offset, "size": size}) + "\n")
            with mock.patch.object(mapstyle.tarfile, "open", side_effect=AssertionError("tar scanned")):
                for rel, samples in expected.items():
                    self.assertEqual(shardfs.index_shard(os.path.join(root, rel)), samples)
                ds = shardfs.TarIndexDataset(root)
                got = {(os.path.relpath(s["__shard__"], root), s["__key__"]): bytes(s["jpg"]) for s in (ds[i] for i in range(len(ds)))}
            self.assertEqual(got, want)


class ScheduleTest(unittest.TestCase):
    """ScheduledSampler yields its sampler's order and writes the samples' ranges, in that order, ahead."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        make_shards(self.root, n_shards=3, per_shard=7)
        self.side = fake_mount(self.root)
        self.ds = shardfs.TarIndexDataset(self.root)
        self.order = list(range(len(self.ds)))
        import random

        random.Random(15).shuffle(self.order)

    def tearDown(self):
        self.tmp.cleanup()

    def test_lines_are_the_samples_ranges_in_order(self):
        got = list(shardfs.ScheduledSampler(self.ds, sampler=self.order, lookahead=10**6))
        self.assertEqual(got, self.order)
        with open(os.path.join(self.side, "hints")) as f:
            lines = f.read().splitlines()
        want = []
        for i in self.order:
            shard, key, members = self.ds.samples[i]
            rel = os.path.relpath(self.ds.shards[shard], self.root)
            sample = self.ds[i]
            with open(os.path.join(self.root, rel), "rb") as f:
                data = f.read()
            for offset, size in members.values():  # in the order dataset[i] reads them
                want.append("%s %d %d" % (rel, offset, size))
            self.assertEqual(data[members["jpg"][0]:][:members["jpg"][1]], bytes(sample["jpg"]))
        self.assertEqual(lines, want)

    def test_written_a_window_ahead(self):
        from unittest import mock

        calls = []
        real = self.ds.write_schedule
        with mock.patch.object(self.ds, "write_schedule", side_effect=lambda idx: calls.append(list(idx)) or real(idx)):
            sent = 0
            for i, index in enumerate(shardfs.ScheduledSampler(self.ds, sampler=self.order, lookahead=6)):
                sent = sum(map(len, calls))
                self.assertGreaterEqual(sent, min(i + 1 + 3, len(self.order)), "sample %d yielded before the schedule reached %d" % (i, i + 3))
                self.assertLessEqual(sent, i + 6, "more than a window written ahead")
        self.assertEqual([x for c in calls for x in c], self.order)

    def test_off_a_mount_writes_nothing(self):
        with tempfile.TemporaryDirectory() as root:
            make_shards(root, n_shards=2, per_shard=3)
            ds = shardfs.TarIndexDataset(root)
            self.assertEqual(ds.write_schedule(range(len(ds))), 0)
            order = [5, 0, 3, 1, 4, 2]
            self.assertEqual(list(shardfs.ScheduledSampler(ds, sampler=order)), order)

    @unittest.skipIf(torch is None, "torch not installed")
    def test_distributed_sampler_epochs_and_ranks(self):
        from torch.utils.data import DistributedSampler

        seen = []
        for rank in range(2):
            inner = DistributedSampler(self.ds, num_replicas=2, rank=rank, shuffle=True, seed=3)
            ss = shardfs.ScheduledSampler(self.ds, sampler=inner)
            ss.set_epoch(1)
            ref = DistributedSampler(self.ds, num_replicas=2, rank=rank, shuffle=True, seed=3)
            ref.set_epoch(1)
            self.assertEqual(list(ss), list(ref))
            seen += list(ss)
        self.assertEqual(set(seen), set(range(len(self.ds))))
        self.check_loader(shardfs.ScheduledSampler(self.ds))

    def check_loader(self, sampler):
        keys = [s["__key__"] for s in DataLoader(self.ds, batch_size=None, sampler=sampler, num_workers=2)]
        self.assertEqual(sorted(keys), sorted(k for _, k, _ in self.ds.samples))


if __name__ == "__main__":
    unittest.main()
