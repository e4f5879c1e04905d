"""The C library, libmccl.so.0, through ctypes: its functions with their
argument and result types, loaded once.

Where it is looked for: MCCL_LIBRARY (a path) alone when set; else next
to this module (a copy put there), in the build tree this package lies in
(build/libmccl.so.0, three levels up from libclient/python/mccl), and the
dynamic linker's search (an installed libmccl), in that order.  ctypes releases the GIL around every call, so a rank waiting in
mccl_wait does not stop the interpreter's other threads.
"""

import ctypes
import os

_c_int_p = ctypes.POINTER(ctypes.c_int)
_void_pp = ctypes.POINTER(ctypes.c_void_p)
_size_p = ctypes.POINTER(ctypes.c_size_t)

# name: (result type, argument types)
_PROTOTYPES = {
    "mccl_comm_init": (ctypes.c_int, [_void_pp, ctypes.c_char_p,
                                      ctypes.c_int, ctypes.c_int]),
    "mccl_comm_init_env": (ctypes.c_int, [_void_pp]),
    "mccl_comm_destroy": (ctypes.c_int, [ctypes.c_void_p]),
    "mccl_comm_abort": (ctypes.c_int, [ctypes.c_void_p]),
    "mccl_comm_rank": (ctypes.c_int, [ctypes.c_void_p]),
    "mccl_comm_size": (ctypes.c_int, [ctypes.c_void_p]),
    "mccl_comm_split": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int,
                                       ctypes.c_int, _void_pp]),
    "mccl_alloc": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t]),
    "mccl_free": (None, [ctypes.c_void_p, ctypes.c_void_p]),
    "mccl_allreduce": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_size_t, ctypes.c_int,
                                      ctypes.c_int, ctypes.c_void_p,
                                      _void_pp]),
    "mccl_broadcast": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t,
                                      ctypes.c_int, ctypes.c_int,
                                      ctypes.c_void_p, _void_pp]),
    "mccl_barrier": (ctypes.c_int, [ctypes.c_void_p, _void_pp]),
    "mccl_reduce": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_size_t, ctypes.c_int,
                                   ctypes.c_int, ctypes.c_int,
                                   ctypes.c_void_p, _void_pp]),
    "mccl_allgather": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_size_t, ctypes.c_int,
                                      ctypes.c_void_p, _void_pp]),
    "mccl_reduce_scatter": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p,
                                           ctypes.c_size_t, ctypes.c_int,
                                           ctypes.c_int, ctypes.c_void_p,
                                           _void_pp]),
    "mccl_alltoall": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_size_t, ctypes.c_int,
                                     ctypes.c_void_p, _void_pp]),
    "mccl_gather": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_size_t, ctypes.c_int,
                                   ctypes.c_int, ctypes.c_void_p, _void_pp]),
    "mccl_scatter": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_size_t, ctypes.c_int,
                                    ctypes.c_int, ctypes.c_void_p,
                                    _void_pp]),
    "mccl_allgatherv": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.c_void_p, _size_p, _size_p,
                                       ctypes.c_int, ctypes.c_void_p,
                                       _void_pp]),
    "mccl_alltoallv": (ctypes.c_int, [ctypes.c_void_p, _size_p, _size_p,
                                      ctypes.c_void_p, _size_p, _size_p,
                                      ctypes.c_int, ctypes.c_void_p,
                                      _void_pp]),
    "mccl_send": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_void_p, _void_pp]),
    "mccl_recv": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_void_p, _void_pp]),
    "mccl_recv_status": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t,
                                        ctypes.c_int, ctypes.c_int,
                                        ctypes.c_int, ctypes.c_void_p,
                                        ctypes.c_void_p, _void_pp]),
    "mccl_comm_set_timeout": (ctypes.c_int, [ctypes.c_void_p,
                                             ctypes.c_int]),
    "mccl_comm_set_wire_dtype": (ctypes.c_int, [ctypes.c_void_p,
                                                ctypes.c_int]),
    "mccl_comm_stats": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p,
                                       ctypes.c_size_t]),
    "mccl_wait": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]),
    "mccl_test": (ctypes.c_int, [ctypes.c_void_p, _c_int_p]),
    "mccl_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "mccl_last_error": (ctypes.c_char_p, [ctypes.c_void_p]),
    "mccl_dtype_size": (ctypes.c_size_t, [ctypes.c_int]),
}


def _candidates():
    env = os.environ.get("MCCL_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.path.join(here, "..", "..", "..", "build", "libmccl.so.0")
    return [os.path.join(here, "libmccl.so.0"), os.path.normpath(build),
            "libmccl.so.0"]


def load():
    """libmccl, loaded on first use: a singleton world needs none."""
    global _lib
    if _lib is None:
        _lib = _open()
    return _lib


def _open():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append("%s: no such file" % path)
            continue
        try:
            # global: mccl._native (the torch backend) links to this one
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errors.append(str(e))
            continue
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        return lib
    raise ImportError("mccl: cannot load libmccl.so.0: " + "; ".join(errors) +
                      " (install libmccl, or set MCCL_LIBRARY to its path)")


_lib = None
