"""The GPU client's modules form a tree: each imports only modules below
it, the ABI none of the package, and nothing imports the Client."""

import ast
import os
import unittest

import shardfs.gpu

GPU_DIR = os.path.dirname(os.path.abspath(shardfs.gpu.__file__))

# What each module may import of the package, at most.
ALLOWED = {
    "abi": set(),
    "engines": set(),
    "cufile": set(),
    "prefetcher": set(),
    "ctl": {"abi"},
    "batch": {"abi", "ctl"},
    "lease": {"abi"},
    "ramtier": {"abi", "engines"},
    "wholefile": {"cufile"},
    "client": {"abi", "ctl", "engines", "cufile", "batch", "lease", "ramtier", "wholefile"},
    "__init__": {"abi", "client", "lease", "prefetcher", "ctl", "batch", ".._lazy"},
}


def package_imports(path):
    """The modules of the package that the file at path imports."""
    with open(path) as f:
        tree = ast.parse(f.read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 2 and node.module == "_lazy":
            out.add(".._lazy")  # shardfs's lazy names, which import nothing of shardfs.gpu
        elif isinstance(node, ast.ImportFrom) and (node.level > 1 or (node.module or "").startswith("shardfs")):
            out.add("<outside shardfs.gpu: %s>" % (node.module or "."))
        elif isinstance(node, ast.Import):
            out.update("<outside shardfs.gpu: %s>" % a.name for a in node.names if a.name.startswith("shardfs"))
    return out


class LayoutTest(unittest.TestCase):
    def test_every_module_is_in_the_table(self):
        found = {f[:-3] for f in os.listdir(GPU_DIR) if f.endswith(".py")}
        self.assertEqual(found, set(ALLOWED))

    def test_modules_import_only_what_lies_below_them(self):
        for name, allowed in ALLOWED.items():
            with self.subTest(module=name):
                got = package_imports(os.path.join(GPU_DIR, name + ".py"))
                self.assertLessEqual(got, allowed, "shardfs.gpu.%s imports %s" % (name, sorted(got - allowed)))

    def test_the_table_has_no_cycle(self):
        state = {}

        def visit(m, path):
            self.assertNotEqual(state.get(m), "open", "import cycle: %s" % " -> ".join(path + [m]))
            if state.get(m) == "done":
                return
            state[m] = "open"
            for d in ALLOWED[m] - {".._lazy"}:
                visit(d, path + [m])
            state[m] = "done"

        for m in ALLOWED:
            visit(m, [])


if __name__ == "__main__":
    unittest.main()
