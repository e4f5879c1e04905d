"""The package's build: pyproject.toml declares it; this adds the C side.

Built from the MCCL source tree (pip install ./libclient/python, make
wheel), the wheel carries libmccl.so.0, which the package loads, and
mcclctl, with which mcclrun checks the daemons: both made by the tree's
Makefile and copied into the package; and, where this Python has torch,
mccl._native, the torch backend in C++, built against that torch.  Its build folders are temporary,
so nothing is left in the tree.  Outside a source tree (a copy of this
folder alone) there is nothing to build them from, and the package loads
an installed libmccl as before.
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
# What the package takes from the tree's build, and where it goes.
FROM_TREE = {"build/libmccl.so.0": "libmccl.so.0", "build/mcclctl": "mcclctl"}
SCRATCH = tempfile.mkdtemp(prefix="mccl-pybuild-")
atexit.register(shutil.rmtree, SCRATCH, True)


def in_source_tree():
    return os.path.isfile(os.path.join(TOP, "Makefile")) and \
        os.path.isfile(os.path.join(TOP, "libclient", "mccl.c"))


class BuildWithLibrary(build_py):
    """The Python files, and from a source tree the C library and
    mcclctl."""

    def run(self):
        super().run()
        if not in_source_tree():
            self.announce("mccl: no MCCL source tree above %s: the wheel "
                          "has no libmccl.so.0 (an installed one is used)"
                          % HERE, level=3)
            return
        subprocess.check_call(["make", "-C", TOP, "--no-print-directory"]
                              + sorted(FROM_TREE))
        for src, name in FROM_TREE.items():
            dst = os.path.join(self.build_lib, "mccl", name)
            shutil.copy2(os.path.join(TOP, src), dst)
            os.chmod(dst, 0o755)
        self.build_native(os.path.join(self.build_lib, "mccl"))

    def build_native(self, into):
        """The torch backend in C++, for the torch this Python has (none:
        the Python backend serves)."""
        if subprocess.call([sys.executable, "-c", "import torch"],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) != 0:
            self.announce("mccl: no torch here: the wheel has no native "
                          "torch backend", level=3)
            return
        built = self.tree_native()
        if built:	# make built it for this very torch: as it is
            shutil.copy2(built, into)
            return
        subprocess.check_call([sys.executable, os.path.join(
            TOP, "libclient", "torch", "build.py"), into])

    @staticmethod
    def tree_native():
        """The tree's mccl._native (make's), where it is for this Python's
        torch."""
        probe = ("import sys, torch; sys.path.insert(0, %r); "
                 "from mccl import _lib; _lib.load(); "
                 "from mccl import _native as n; "
                 "print(n.__file__ if n.TORCH_VERSION == torch.__version__ "
                 "else '')" % os.path.join(TOP, "libclient", "python"))
        env = dict(os.environ, MCCL_LIBRARY=os.path.join(TOP, "build",
                                                         "libmccl.so.0"))
        try:
            out = subprocess.run([sys.executable, "-c", probe], env=env,
                                 capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return None
        path = out.stdout.strip()
        return path if out.returncode == 0 and path else None


setup(cmdclass={"build_py": BuildWithLibrary},
      options={"build": {"build_base": os.path.join(SCRATCH, "build")},
               "egg_info": {"egg_base": SCRATCH}})
