"""build.py: builds mccl._native, the torch backend in C++, against the
torch this Python runs, into DIR (the package's folder, or a wheel's).

    python3 libclient/torch/build.py DIR

libmccl is not linked in: the module takes its functions from the one
mccl._lib loaded (RTLD_GLOBAL), so that the comm handles it is given are
that library's."""
import os
import re
import shutil
import sys
import tempfile

from multiprocessing.pool import ThreadPool

from setuptools import Extension, setup
from distutils import ccompiler	# setuptools' own, imported after it
import torch
from torch.utils import cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ["work.cpp", "ops.cpp", "pool.cpp", "coalesce.cpp", "split.cpp",
           "module.cpp"]

# What torch 2's c10d::Backend offers, found in its header (the methods
# came in over several versions; their declarations say it best): one row
# per feature, the macro and the declaration it needs.
FEATURES = [
    ("MCCL_C10D_COALESCING", r"bool supportsCoalescing\(\) const"),
    ("MCCL_C10D_COALESCING", r"virtual void startCoalescing\(\)"),
    ("MCCL_C10D_TENSOR_COALESCED", r"allgather_into_tensor_coalesced\("),
    ("MCCL_C10D_TENSOR_COALESCED", r"reduce_scatter_tensor_coalesced\("),
    ("MCCL_C10D_SPLIT", r"bool supportsSplitting\(\) const"),
    ("MCCL_C10D_SPLIT", r"virtual c10::intrusive_ptr<Backend> split\(\s*"
     r"const c10::intrusive_ptr<Store>&\s*store,\s*"
     r"const std::vector<int>&\s*ranks,\s*"
     r"const c10::intrusive_ptr<Options>&\s*opts\)"),
    ("MCCL_C10D_OPTIONS", r"virtual c10::intrusive_ptr<Options> "
     r"getBackendOptions\(\)"),
    ("MCCL_C10D_EAGER_CONNECT", r"virtual void eagerConnectSingleDevice\("
     r"at::Device device\)"),
    ("MCCL_C10D_ABORT", r"virtual void abort\(\)"),
]


def features():
    """The macros whose every declaration torch's Backend.hpp has (none
    before torch 2, where the backend is a ProcessGroup)."""
    if int(torch.__version__.split(".")[0]) < 2:
        return []
    text = ""
    for d in cpp_extension.include_paths():
        p = os.path.join(d, "torch/csrc/distributed/c10d/Backend.hpp")
        if os.path.exists(p):
            with open(p) as f:
                text = f.read()
            break
    found = {}
    for macro, decl in FEATURES:
        found[macro] = found.get(macro, True) and \
            re.search(decl, text) is not None
    return [(m, "1") for m, ok in found.items() if ok]


def compile_in_parallel(self, sources, output_dir=None, macros=None,
                        include_dirs=None, debug=0, extra_preargs=None,
                        extra_postargs=None, depends=None):
    """distutils' CCompiler.compile, one source per CPU at once (it
    compiles them one by one; torch's headers make each take half a
    minute)."""
    macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
        output_dir, macros, include_dirs, sources, depends, extra_postargs)
    cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

    def one(obj):
        src, ext = build[obj]
        self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)
    with ThreadPool(os.cpu_count() or 1) as pool:
        pool.map(one, objects)
    return objects


def main():
    ccompiler.CCompiler.compile = compile_in_parallel
    out = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="mccl-native-")
    try:
        ext = cpp_extension.CppExtension(
            "_native", [os.path.join(HERE, s) for s in SOURCES],
            include_dirs=[HERE, os.path.join(HERE, "..")],
            define_macros=[("MCCL_BUILT_FOR_TORCH",
                            '"%s"' % torch.__version__)] + features(),
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
