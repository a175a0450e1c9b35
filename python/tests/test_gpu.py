"""The GPU client's ABI constants against the table in gds/README.md (gds/abi.go is the reference)."""

import unittest

try:
    import numpy  # noqa: F401
except ImportError:
    numpy = None


@unittest.skipIf(numpy is None, "numpy not installed")
class ABITest(unittest.TestCase):
    def test_ioctl_numbers(self):
        from shardfs import gpu

        self.assertEqual(hex(gpu.REGISTER), "0xc118bd01")
        self.assertEqual(hex(gpu.UNREGISTER), "0x4010bd02")
        self.assertEqual(hex(gpu.READ), "0xc430bd03")
        self.assertEqual(hex(gpu.LEASE), "0xdc30bd04")
        self.assertEqual(hex(gpu.LEASE_DROP), "0x4010bd05")
        self.assertEqual(hex(gpu.SUBMIT), "0xc030bd06")
        self.assertEqual(hex(gpu.WAIT), "0xc020bd07")
        self.assertEqual(gpu.ENTRY_DTYPE.itemsize, 64)

    def test_client_on_a_plain_directory_names_the_ctl_file(self):
        import tempfile

        import shardfs

        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(FileNotFoundError) as e:
                shardfs.Client(d)
            self.assertIn(".shardfs/ctl", str(e.exception))


if __name__ == "__main__":
    unittest.main()
