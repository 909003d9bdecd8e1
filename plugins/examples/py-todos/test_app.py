"""Unit tests of py-todos, natively (with sdk/python on PYTHONPATH): `python3 -m unittest`."""

import os
import tempfile
import unittest

from app import plugin, todos
from toolwright_plugin import Context


class TodosTest(unittest.TestCase):
    def test_lists_sorted_todos_skipping_dot_files(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "src"))
            with open(os.path.join(root, "src", "b.rs"), "w") as f:
                f.write("fn main() {}\n// TODO: tidy\r\n")
            with open(os.path.join(root, "a.txt"), "w") as f:
                f.write("TODO first\n")
            with open(os.path.join(root, ".hidden"), "w") as f:
                f.write("TODO never\n")
            self.assertEqual(todos(root), ["a.txt:1: TODO first", "src/b.rs:2: TODO: tidy"])
            self.assertEqual(plugin.run("py_todos", {}, Context.for_tests(root)).text,
                             "a.txt:1: TODO first\nsrc/b.rs:2: TODO: tidy")

    def test_no_todos(self):
        with tempfile.TemporaryDirectory() as root:
            self.assertEqual(plugin.run("py_todos", {}, Context.for_tests(root)).text, "No TODOs found")


if __name__ == "__main__":
    unittest.main()
