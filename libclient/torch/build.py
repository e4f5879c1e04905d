"""build.py: builds mccl._native, the torch backend in C++, against the
torch this Python runs, into DIR (the package's folder, or a wheel's).

    python3 libclient/torch/build.py DIR

libmccl is not linked in: the module takes its functions from the one
mccl._lib loaded (RTLD_GLOBAL), so that the comm handles it is given are
that library's."""
import os
import shutil
import sys
import tempfile

from setuptools import Extension, setup
import torch
from torch.utils import cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ["work.cpp", "ops.cpp", "module.cpp"]


def main():
    out = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="mccl-native-")
    try:
        ext = cpp_extension.CppExtension(
            "_native", [os.path.join(HERE, s) for s in SOURCES],
            include_dirs=[HERE, os.path.join(HERE, "..")],
            define_macros=[("MCCL_BUILT_FOR_TORCH",
                            '"%s"' % torch.__version__)],
            extra_compile_args=["-O2", "-std=c++17", "-Wall",
                                "-Wno-unused-parameter",
                                "-Wno-deprecated-declarations"])
        sys.argv = [sys.argv[0], "-q", "build_ext", "--build-lib", out,
                    "--build-temp", tmp]
        setup(name="mccl-native", ext_modules=[ext],
              cmdclass={"build_ext":
                        cpp_extension.BuildExtension.with_options(
                            use_ninja=False)})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
