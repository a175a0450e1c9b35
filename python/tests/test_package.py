"""The package as installed: its public names, and that it imports without torch or numpy."""

import os
import subprocess
import sys
import unittest

import shardfs

PUBLIC = ["TarShards", "TarIndexDataset", "build_index", "index_shard", "find_shards", "split_key",
          "decode_member", "Hints", "write_hints", "find_mount", "side_files", "SideFiles", "read_stats",
          "capabilities", "Client"]


class PackageTest(unittest.TestCase):
    def test_public_names(self):
        for name in PUBLIC:
            with self.subTest(name=name):
                self.assertTrue(hasattr(shardfs, name), "shardfs.%s is missing" % name)
                self.assertIn(name, shardfs.__all__)

    def test_unknown_name_is_attribute_error(self):
        with self.assertRaises(AttributeError):
            shardfs.NoSuchThing  # noqa: B018

    def test_installed_copy_under_test(self):
        # SHARDFS_PACKAGE_SOURCE is python/ of the checkout (scripts/test.sh
        # sets it); the copy imported must be the installed one.
        source = os.environ.get("SHARDFS_PACKAGE_SOURCE")
        if source is None:
            self.skipTest("SHARDFS_PACKAGE_SOURCE not set")
        here = os.path.realpath(shardfs.__file__)
        self.assertFalse(here.startswith(os.path.realpath(source) + os.sep),
                         "shardfs imported from the checkout (%s), not the installed copy" % here)

    def test_imports_without_torch_and_numpy(self):
        # None in sys.modules makes `import torch` raise ImportError.
        code = ("import sys; sys.modules['torch'] = None; sys.modules['numpy'] = None\n"
                "import shardfs\n"
                "ds = shardfs.TarShards([]); print(type(ds).__mro__[1].__name__)\n"
                "print(shardfs.TarIndexDataset.__mro__[1].__name__)\n"
                "try:\n    shardfs.Client\nexcept ImportError as e:\n    print('gpu needs', e.name)\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split("\n")[:3], ["object", "object", "gpu needs numpy"])


if __name__ == "__main__":
    unittest.main()
