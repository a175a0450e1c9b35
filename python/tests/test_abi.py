"""The GPU client's ABI against the golden values the daemon's are checked
against too (abi_golden.json beside this file; test/python_test.go holds
gds/abi*.go to it), and what needs no mount of the client."""

import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

from shardfs.gpu import abi

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "abi_golden.json")


def golden():
    with open(GOLDEN) as f:
        return json.load(f)


class ABITest(unittest.TestCase):
    def test_every_command_number_is_the_daemons(self):
        want = {name: int(v, 16) for name, v in golden()["commands"].items()}
        self.assertEqual(sorted(abi.COMMANDS), sorted(want), "commands of the client and of the golden file")
        for name, number in want.items():
            with self.subTest(command=name):
                self.assertEqual(hex(abi.COMMANDS[name]), hex(number))

    def test_command_numbers_encode_their_struct_sizes(self):
        # The size field of a number is its request's size: a layout
        # changed without its number fails here.
        sizes = {"register": abi.REGISTER_REQ.size, "unregister": abi.UNREGISTER_REQ.size,
                 "read": abi.READ_REQ.size, "lease": abi.LEASE_SIZE, "lease_drop": abi.LEASE_DROP_REQ.size,
                 "submit": abi.SUBMIT_REQ.size, "wait": abi.WAIT_REQ.size, "whole_file": abi.WHOLE_REQ.size}
        for name, number in abi.COMMANDS.items():
            with self.subTest(command=name):
                self.assertEqual(number >> 16 & 0x3FFF, sizes[name])
                self.assertEqual(number >> 8 & 0xFF, abi.IOCTL_TYPE)

    def test_version_flags_and_sizes_are_the_daemons(self):
        g = golden()
        self.assertEqual(abi.ABI_VERSION, g["abi_version"])
        flags = {"submit_wait": abi.SUBMIT_WAIT, "lease_unless_in_ram": abi.LEASE_UNLESS_IN_RAM,
                 "lease_from_ram": abi.LEASE_FROM_RAM, "entry_done": abi.ENTRY_DONE}
        self.assertEqual(flags, g["flags"])
        sizes = {"shm_name": abi.SHM_NAME_SIZE, "path": abi.PATH_SIZE, "max_lease_extents": abi.MAX_LEASE_EXTENTS,
                 "max_lease_paths": abi.MAX_LEASE_PATHS, "batch_entry": abi.ENTRY.size}
        self.assertEqual(sizes, g["sizes"])

    def test_a_field_too_long_is_refused_by_name(self):
        with self.assertRaises(ValueError) as e:
            abi.cstr("x" * abi.PATH_SIZE, abi.PATH_SIZE)
        self.assertIn("1024-byte field", str(e.exception))
        self.assertEqual(struct.unpack("<4s", abi.cstr("a.tar", abi.PATH_SIZE)[:4])[0], b"a.ta")

    def test_abi_imports_without_numpy(self):
        code = "import sys; sys.modules['numpy'] = None\nfrom shardfs.gpu import abi, WHOLE_FILE\nprint(hex(WHOLE_FILE))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), golden()["commands"]["whole_file"])


class ClientTest(unittest.TestCase):
    def test_client_on_a_plain_directory_names_the_ctl_file(self):
        try:
            import numpy  # noqa: F401
        except ImportError:
            self.fail("numpy is not installed: the GPU client cannot be tested (apt install python3-numpy)")
        import shardfs

        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(FileNotFoundError) as e:
                shardfs.Client(d)
            self.assertIn(".shardfs/ctl", str(e.exception))


if __name__ == "__main__":
    unittest.main()
