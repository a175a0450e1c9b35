"""find_mount, side_files, read_stats and the hints writer on fake mount roots."""

import os
import tempfile
import unittest

import shardfs
from helpers import fake_mount


class MountTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.tmp.name, "mnt")
        os.makedirs(os.path.join(self.root, "a", "b"))
        self.plain = os.path.join(self.tmp.name, "plain")
        os.makedirs(self.plain)

    def tearDown(self):
        self.tmp.cleanup()

    def test_not_a_mount(self):
        self.assertIsNone(shardfs.find_mount(self.root))
        self.assertIsNone(shardfs.side_files(self.root))
        with self.assertRaisesRegex(FileNotFoundError, "not on a shardfs mount"):
            shardfs.read_stats(self.root)

    def test_found_from_any_path_inside(self):
        fake_mount(self.root)
        for p in (self.root, os.path.join(self.root, "a", "b"), os.path.join(self.root, "a", "b", "x.tar")):
            with self.subTest(path=p):
                found = shardfs.find_mount(p)
                self.assertEqual(found.root, self.root)
                self.assertEqual(found.hints, os.path.join(self.root, ".shardfs", "hints"))
                self.assertEqual(found.ctl, os.path.join(self.root, ".shardfs", "ctl"))
        self.assertIsNone(shardfs.side_files(os.path.join(self.root, "a")))
        self.assertEqual(shardfs.read_stats(os.path.join(self.root, "a")), {"reads": 3})
        self.assertEqual(shardfs.capabilities(self.root)["abi_version"], 1)

    def hints(self):
        with open(os.path.join(self.root, ".shardfs", "hints")) as f:
            return f.read()

    def test_write_hints_relative_to_root(self):
        fake_mount(self.root)
        paths = [os.path.join(self.root, "a", "b", "s%d.tar" % i) for i in range(3)]
        self.assertEqual(shardfs.write_hints(paths), 3)
        self.assertEqual(self.hints(), "a/b/s0.tar\na/b/s1.tar\na/b/s2.tar\n")
        self.assertEqual(shardfs.write_hints(["x/y.tar"], mount=self.root), 1)
        self.assertEqual(self.hints(), "x/y.tar\n")

    def test_write_hints_elsewhere_is_a_no_op(self):
        self.assertEqual(shardfs.write_hints([os.path.join(self.plain, "s.tar")]), 0)
        self.assertEqual(shardfs.write_hints([]), 0)
        self.assertEqual(os.listdir(self.plain), [])

    def test_hints_lookahead(self):
        fake_mount(self.root)
        shards = [os.path.join(self.root, "s%d.tar" % i) for i in range(5)]
        h = shardfs.Hints(shards, lookahead=2)
        h.advance(0)
        self.assertEqual(self.hints(), "s1.tar\ns2.tar\n")
        h.advance(1)
        self.assertEqual(self.hints(), "s3.tar\n")  # only what was not announced yet
        h.advance(3)
        self.assertEqual(self.hints(), "s4.tar\n")
        open(os.path.join(self.root, ".shardfs", "hints"), "w").close()
        h.advance(4)  # nothing left to announce: no write
        self.assertEqual(self.hints(), "")

    def test_hints_off(self):
        fake_mount(self.root)
        h = shardfs.Hints([os.path.join(self.root, "s0.tar"), os.path.join(self.root, "s1.tar")], lookahead=0)
        h.advance(0)
        self.assertEqual(self.hints(), "")


if __name__ == "__main__":
    unittest.main()
