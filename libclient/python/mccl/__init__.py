"""mccl: MCCL's collectives for Python, over libmccl (the C library).

    import mccl
    world = mccl.init()             # MCCL_*, torchrun, Slurm or Open MPI
    x = numpy.ones(1024, dtype="float32")
    world.allreduce(x)              # in place; x is summed over all ranks

Without a launcher's environment, init() returns a world of one rank in
which every collective returns its input and no daemon is needed, so the
same script runs alone or distributed.  Buffers: CPU torch tensors, numpy
arrays, and anything with the buffer protocol, contiguous; results are
written in place or into `out`.  mccl.empty() allocates memory the daemon
shares (no copy).  Every failure raises an mccl.Error subclass carrying
MCCL's code and the daemon's message.  See mccl(3) for the whole API.
"""

import atexit
import ctypes
import os
import threading
import weakref

from . import _lib
from ._buffers import (BFLOAT16, DTYPE_NAMES, DTYPE_SIZES, FLOAT16,
                       FLOAT32, FLOAT64, INT8, INT32, INT64, UINT8, UINT32,
                       UINT64, dtype_code, like, view)

__all__ = ["init", "Comm", "Request", "empty", "Error", "SUM", "PROD",
           "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR", "ANY_TAG",
           "UNDEFINED"]

__version__ = "0.1.0"

# Reduction operations (mccl_op_t) and special values of mccl.h.
SUM, PROD, MIN, MAX, AVG, BAND, BOR, BXOR = range(8)
OP_NAMES = ("sum", "prod", "min", "max", "avg", "band", "bor", "bxor")
ANY_TAG = -1
UNDEFINED = -1

# ---- errors: one class per code, under Error ----


class Error(Exception):
    """An MCCL call failed: .code is the mccl_result_t, .message the
    daemon's or library's words."""

    code = None
    name = "MCCL_ERR"

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self):
        return "%s: %s" % (self.name, self.message)


class InvalidArgumentError(Error, ValueError):
    code, name = 1, "MCCL_ERR_INVALID_ARGUMENT"


class UnsupportedError(Error):
    code, name = 2, "MCCL_ERR_UNSUPPORTED"


class ConnectError(Error, ConnectionError):
    code, name = 3, "MCCL_ERR_CONNECT"


class TimeoutError(Error, TimeoutError):   # noqa: A001 (also the builtin)
    code, name = 4, "MCCL_ERR_TIMEOUT"


class PeerFailedError(Error):
    code, name = 5, "MCCL_ERR_PEER_FAILED"


class AbortedError(Error):
    code, name = 6, "MCCL_ERR_ABORTED"


class PermissionError(Error, PermissionError):   # noqa: A001
    code, name = 7, "MCCL_ERR_PERMISSION"


class NoMemoryError(Error, MemoryError):
    code, name = 8, "MCCL_ERR_NO_MEMORY"


class ProtocolError(Error):
    code, name = 9, "MCCL_ERR_PROTOCOL"


class InternalError(Error):
    code, name = 10, "MCCL_ERR_INTERNAL"


_ERRORS = {c.code: c for c in (
    InvalidArgumentError, UnsupportedError, ConnectError, TimeoutError,
    PeerFailedError, AbortedError, PermissionError, NoMemoryError,
    ProtocolError, InternalError)}


def _raise(code, handle):
    msg = _lib.load().mccl_last_error(handle)
    cls = _ERRORS.get(code, InternalError)
    raise cls(msg.decode(errors="replace") if msg else cls.name, code)


def _check(rc, handle):
    if rc != 0:
        _raise(rc, handle)

# ---- requests ----


class Request:
    """An operation in flight.  wait() returns its result (the output
    buffer, or None) and raises its error; test() says whether it is done,
    without blocking.  The buffers stay referenced until it completes."""

    __slots__ = ("_comm", "_handle", "_result", "_bufs", "_done", "_error")

    def __init__(self, comm, handle, result, bufs):
        self._comm = comm
        self._handle = handle
        self._result = result
        self._bufs = bufs
        self._done = handle is None
        self._error = None

    def _finish(self, rc):
        self._handle = None
        self._done = True
        self._bufs = None
        if rc != 0:
            msg = _lib.load().mccl_last_error(self._comm._handle)
            cls = _ERRORS.get(rc, InternalError)
            self._error = cls(msg.decode(errors="replace") if msg else
                              cls.name, rc)

    def wait(self, timeout=None):
        """Wait at most timeout seconds (None: the operation's own
        deadline).  A TimeoutError of the wait itself leaves the request
        pending: wait again, or destroy the communicator."""
        if not self._done:
            ms = -1 if timeout is None else max(0, int(timeout * 1000))
            rc = _lib.load().mccl_wait(self._handle, ms)
            if rc == TimeoutError.code and timeout is not None and \
                    self._pending_after_timeout():
                _raise(rc, self._comm._handle)
            self._finish(rc)
        if self._error is not None:
            raise self._error
        return self._result

    def _pending_after_timeout(self):
        done = ctypes.c_int(0)
        rc = _lib.load().mccl_test(self._handle, ctypes.byref(done))
        if done.value or rc != 0:
            self._finish(rc)
            return False
        return True

    def test(self):
        """True once the operation completed (raising its error if it
        failed); False while it is pending.  Never blocks."""
        if not self._done:
            done = ctypes.c_int(0)
            rc = _lib.load().mccl_test(self._handle, ctypes.byref(done))
            if not done.value and rc == 0:
                return False
            self._finish(rc)
        if self._error is not None:
            raise self._error
        return True

    @property
    def done(self):
        return self._done

# ---- communicators ----


def _pow_ok(n):
    return isinstance(n, int) and not isinstance(n, bool)


class Comm:
    """A communicator: rank `rank` of `size` in a job.  Collectives take
    buffers (see the module's documentation) and return the output; each
    has a non-blocking twin, i<name>, that returns a Request."""

    def __init__(self, handle, job, rank=0, size=1):
        self._handle = handle
        self._lock = threading.Lock()
        self.job = job
        if handle is not None:
            lib = _lib.load()
            rank = lib.mccl_comm_rank(handle)
            size = lib.mccl_comm_size(handle)
        self.rank = rank
        self.size = size
        self._destroyed = False
        self._segments = weakref.WeakSet()

    @classmethod
    def create(cls, job, rank, size):
        """A communicator of its own: rank of size in job (besides the
        world of init())."""
        if not isinstance(job, str) or not _pow_ok(rank) or \
                not _pow_ok(size):
            raise TypeError("mccl: job must be a str, rank and size ints")
        handle = ctypes.c_void_p()
        _check(_lib.load().mccl_comm_init(ctypes.byref(handle), job.encode(),
                                          size, rank), None)
        return cls(handle, job)

    def __repr__(self):
        return "<mccl.Comm job %r rank %d of %d%s>" % (
            self.job, self.rank, self.size,
            "" if self._handle is not None or self.size > 1 else
            " (alone, no daemon)")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    @property
    def alone(self):
        """A world of one with no daemon: collectives return their input."""
        return self._handle is None and not self._destroyed

    def _live(self):
        if self._destroyed:
            raise InvalidArgumentError("the communicator was destroyed",
                                       InvalidArgumentError.code)

    # -- the one path every operation takes --

    def _submit(self, fn, args, result, bufs, nonblocking):
        self._live()
        if self._handle is None:
            return Request(self, None, result, None) if nonblocking \
                else result
        if not nonblocking:
            _check(fn(*args, self._handle, None), self._handle)
            return result
        req = ctypes.c_void_p()
        _check(fn(*args, self._handle, ctypes.byref(req)), self._handle)
        return Request(self, req, result, bufs)

    @staticmethod
    def _op(op):
        if not _pow_ok(op) or not 0 <= op < len(OP_NAMES):
            raise ValueError("mccl: op %r is not one of mccl.SUM, PROD, "
                             "MIN, MAX, AVG, BAND, BOR, BXOR" % (op,))
        return op

    def _rank_arg(self, r, what):
        if not _pow_ok(r) or not 0 <= r < self.size:
            raise ValueError("mccl: %s %r is out of range for %d ranks" %
                             (what, r, self.size))
        return r

    def _out(self, b, out, count, what, shape=None, dtype=None):
        """The output buffer: out checked to hold count elements of b's
        dtype, or a new one like b."""
        if out is None:
            o = view(like(b, count, shape), what, True)
        else:
            o = view(out, what, True, dtype)
            if o.dtype != b.dtype:
                raise TypeError("mccl: %s is %s, the input %s" % (
                    what, DTYPE_NAMES[o.dtype], DTYPE_NAMES[b.dtype]))
            if o.count != count:
                raise ValueError("mccl: %s holds %d elements, %d needed" %
                                 (what, o.count, count))
        return o

    @staticmethod
    def _copy(dst, src):
        if dst.ptr != src.ptr and src.nbytes:
            ctypes.memmove(dst.ptr, src.ptr, src.nbytes)

    # -- collectives --

    def _allreduce(self, buf, out, op, dtype, nb):
        b = view(buf, "buf", out is None, dtype)
        o = b if out is None else self._out(b, out, b.count, "out",
                                            dtype=dtype)
        if self._handle is None:
            self._copy(o, b)
        return self._submit(_lib.load().mccl_allreduce if self._handle
                            else None, (b.ptr, o.ptr, b.count, b.dtype,
                                        self._op(op)), o.obj, (b, o), nb)

    def allreduce(self, buf, out=None, op=SUM, *, dtype=None):
        """out (or buf, in place) = op over every rank's buf."""
        return self._allreduce(buf, out, op, dtype, False)

    def iallreduce(self, buf, out=None, op=SUM, *, dtype=None):
        return self._allreduce(buf, out, op, dtype, True)

    def _broadcast(self, buf, root, dtype, nb):
        b = view(buf, "buf", True, dtype)
        return self._submit(_lib.load().mccl_broadcast if self._handle
                            else None, (b.ptr, b.count, b.dtype,
                                        self._rank_arg(root, "root")),
                            b.obj, (b,), nb)

    def broadcast(self, buf, root=0, *, dtype=None):
        """buf on every rank = buf of rank root."""
        return self._broadcast(buf, root, dtype, False)

    def ibroadcast(self, buf, root=0, *, dtype=None):
        return self._broadcast(buf, root, dtype, True)

    def _reduce(self, buf, out, op, root, dtype, nb):
        root = self._rank_arg(root, "root")
        b = view(buf, "buf", out is None, dtype)
        o = b if out is None else self._out(b, out, b.count, "out",
                                            dtype=dtype)
        if self._handle is None:
            self._copy(o, b)
        return self._submit(_lib.load().mccl_reduce if self._handle
                            else None, (b.ptr, o.ptr, b.count, b.dtype,
                                        self._op(op), root), o.obj, (b, o),
                            nb)

    def reduce(self, buf, out=None, op=SUM, root=0, *, dtype=None):
        """out (or buf) on rank root = op over every rank's buf."""
        return self._reduce(buf, out, op, root, dtype, False)

    def ireduce(self, buf, out=None, op=SUM, root=0, *, dtype=None):
        return self._reduce(buf, out, op, root, dtype, True)

    def _allgather(self, buf, out, dtype, nb):
        b = view(buf, "buf", False, dtype)
        shape = None
        if out is None and b.kind != "buffer":
            shape = (self.size,) + tuple(b.obj.shape)
        o = self._out(b, out, b.count * self.size, "out", shape, dtype)
        if self._handle is None:
            self._copy(o, b)
        return self._submit(_lib.load().mccl_allgather if self._handle
                            else None, (b.ptr, o.ptr, b.count, b.dtype),
                            o.obj, (b, o), nb)

    def allgather(self, buf, out=None, *, dtype=None):
        """out = every rank's buf, rank 0's first (shape (size, ...))."""
        return self._allgather(buf, out, dtype, False)

    def iallgather(self, buf, out=None, *, dtype=None):
        return self._allgather(buf, out, dtype, True)

    def _split_shape(self, b):
        """reduce_scatter's output shape: b's first axis divided."""
        if b.kind == "buffer" or not b.obj.shape:
            return None
        shape = tuple(b.obj.shape)
        if shape[0] == self.size:
            return shape[1:] or None
        return (shape[0] // self.size,) + shape[1:]

    def _reduce_scatter(self, buf, out, op, dtype, nb):
        b = view(buf, "buf", False, dtype)
        if b.count % self.size:
            raise ValueError("mccl: buf holds %d elements, not a multiple "
                             "of the %d ranks" % (b.count, self.size))
        n = b.count // self.size
        o = self._out(b, out, n, "out",
                      self._split_shape(b) if out is None else None, dtype)
        if self._handle is None:
            self._copy(o, b)
        return self._submit(_lib.load().mccl_reduce_scatter if self._handle
                            else None, (b.ptr, o.ptr, n, b.dtype,
                                        self._op(op)), o.obj, (b, o), nb)

    def reduce_scatter(self, buf, out=None, op=SUM, *, dtype=None):
        """out on rank r = block r of op over every rank's buf (size
        blocks)."""
        return self._reduce_scatter(buf, out, op, dtype, False)

    def ireduce_scatter(self, buf, out=None, op=SUM, *, dtype=None):
        return self._reduce_scatter(buf, out, op, dtype, True)

    def _alltoall(self, buf, out, dtype, nb):
        b = view(buf, "buf", out is None, dtype)
        if b.count % self.size:
            raise ValueError("mccl: buf holds %d elements, not a multiple "
                             "of the %d ranks" % (b.count, self.size))
        o = b if out is None else self._out(b, out, b.count, "out",
                                            dtype=dtype)
        if self._handle is None:
            self._copy(o, b)
        return self._submit(_lib.load().mccl_alltoall if self._handle
                            else None, (b.ptr, o.ptr, b.count // self.size,
                                        b.dtype), o.obj, (b, o), nb)

    def alltoall(self, buf, out=None, *, dtype=None):
        """Block j of buf goes to rank j; block r of out came from rank
        r (in place without out)."""
        return self._alltoall(buf, out, dtype, False)

    def ialltoall(self, buf, out=None, *, dtype=None):
        return self._alltoall(buf, out, dtype, True)

    def barrier(self):
        """Return once every rank has called it."""
        return self._submit(_lib.load().mccl_barrier if self._handle
                            else None, (), None, (), False)

    def ibarrier(self):
        return self._submit(_lib.load().mccl_barrier if self._handle
                            else None, (), None, (), True)

    # -- point to point --

    def _p2p(self, buf, peer, tag, dtype, what, nb):
        if self._handle is None:
            raise InvalidArgumentError(
                "%s to rank %r: a world of one rank has no one to talk to" %
                (what, peer), InvalidArgumentError.code)
        fn = getattr(_lib.load(), "mccl_" + what)
        b = view(buf, "buf", what == "recv", dtype)
        peer = self._rank_arg(peer, "peer")
        if not _pow_ok(tag) or tag < (-1 if what == "recv" else 0):
            raise ValueError("mccl: tag %r: a send needs a tag >= 0, a "
                             "receive one >= 0 or mccl.ANY_TAG" % (tag,))
        return self._submit(fn, (b.ptr, b.count, b.dtype, peer, tag),
                            b.obj if what == "recv" else None, (b,), nb)

    def send(self, buf, dest, tag=0, *, dtype=None):
        """Send buf to rank dest; returns once the daemon has it."""
        return self._p2p(buf, dest, tag, dtype,
                         "send", False)

    def isend(self, buf, dest, tag=0, *, dtype=None):
        return self._p2p(buf, dest, tag, dtype,
                         "send", True)

    def recv(self, buf, source, tag=ANY_TAG, *, dtype=None):
        """Receive into buf the first message from rank source whose tag
        matches; returns buf."""
        return self._p2p(buf, source, tag, dtype,
                         "recv", False)

    def irecv(self, buf, source, tag=ANY_TAG, *, dtype=None):
        return self._p2p(buf, source, tag, dtype,
                         "recv", True)

    # -- the communicator itself --

    def split(self, color, key=0):
        """As MPI_Comm_split: a new communicator of the ranks passing the
        same color, ordered by key, or None for mccl.UNDEFINED."""
        if not _pow_ok(color) or color < -1 or not _pow_ok(key):
            raise ValueError("mccl: split(color=%r, key=%r): color must be "
                             "an int >= 0 or mccl.UNDEFINED, key an int" %
                             (color, key))
        self._live()
        if self._handle is None:
            return None if color == UNDEFINED else Comm(None, self.job)
        new = ctypes.c_void_p()
        _check(_lib.load().mccl_comm_split(self._handle, color, key,
                                           ctypes.byref(new)), self._handle)
        return Comm(new, "%s/%d" % (self.job, color)) if new.value else None

    def abort(self):
        """End every pending operation of the job, on every rank, with
        mccl.AbortedError."""
        if self._handle is not None:
            _check(_lib.load().mccl_comm_abort(self._handle), self._handle)

    def destroy(self, force=False):
        """Leave the job.  Memory from mccl.empty() on this communicator
        dies with it, so destroy() refuses while such arrays live, unless
        force (what the interpreter's exit does)."""
        if self._handle is None:
            self._destroyed = True
            return
        with self._lock:
            live = len(self._segments)
            if live and not force:
                raise InvalidArgumentError(
                    "%d buffers from mccl.empty() on this communicator are "
                    "still alive: delete them first (they die with it)" %
                    live, InvalidArgumentError.code)
            for seg in list(self._segments):
                seg._dead = True
            handle, self._handle = self._handle, None
            self._destroyed = True
        _lib.load().mccl_comm_destroy(handle)

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            try:
                self.destroy(force=True)
            except Exception:
                pass

# ---- shared memory ----


def _segment_type(nbytes):
    class Segment(ctypes.c_char * nbytes):
        """mccl_alloc memory: freed when the last array over it goes."""

        __hash__ = object.__hash__	# for the comm's WeakSet

        def __del__(self):
            comm = self._comm
            if not getattr(self, "_dead", False) and \
                    comm._handle is not None:  # else it died with comm
                _lib.load().mccl_free(comm._handle, ctypes.addressof(self))
    return Segment


def empty(shape, dtype="float32", comm=None):
    """A new array of shape and dtype on memory shared with the daemon, so
    that collectives on it copy nothing.  A numpy array, or a torch tensor
    when dtype is a torch dtype (or bfloat16, which numpy lacks).  Valid
    while comm (default: the world) lives."""
    code = dtype_code(dtype)
    comm = comm if comm is not None else init()
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    count = 1
    for n in shape:
        if not _pow_ok(n) or n < 0:
            raise ValueError("mccl: empty: bad shape %r" % (shape,))
        count *= n
    want_torch = code == BFLOAT16 or str(dtype).startswith("torch.")
    nbytes = max(1, count * DTYPE_SIZES[code])
    if comm._handle is None:
        seg = bytearray(nbytes)
    else:
        ptr = _lib.load().mccl_alloc(comm._handle, nbytes)
        if not ptr:
            _raise(NoMemoryError.code, comm._handle)
        seg = _segment_type(nbytes).from_address(ptr)
        seg._comm = comm
        comm._segments.add(seg)
    if want_torch:
        import torch
        tdtype = getattr(torch, DTYPE_NAMES[code])
        return torch.frombuffer(seg, dtype=tdtype, count=count).reshape(
            shape)
    import numpy
    return numpy.frombuffer(seg, dtype=DTYPE_NAMES[code],
                            count=count).reshape(shape)

# ---- the world ----


_world = None
_world_lock = threading.Lock()

# A launcher's job name, rank and size variables, as mccl_comm_init_env
# reads them (mccl.h): any of them set means "run distributed".
_LAUNCHER_VARS = ("MCCL_JOB", "MCCL_RANK", "MCCL_NRANKS", "RANK",
                  "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "SLURM_PROCID",
                  "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK",
                  "OMPI_COMM_WORLD_SIZE")


def _launched():
    return any(os.environ.get(v) for v in _LAUNCHER_VARS)


def init(job=None, rank=None, size=None):
    """The world communicator.  With job, rank and size: that job.  Else
    from the launcher's environment (MCCL_JOB/MCCL_RANK/MCCL_NRANKS,
    torchrun, Slurm, Open MPI); with none, a world of one rank that needs
    no daemon.  The first call makes it; later calls return it."""
    global _world
    with _world_lock:
        if _world is not None and not _world._destroyed:
            if job is not None and job != _world.job:
                raise InvalidArgumentError(
                    "mccl.init(job=%r): this process is already in job %r" %
                    (job, _world.job), InvalidArgumentError.code)
            return _world
        _world = _make_world(job, rank, size)
        return _world


def _make_world(job, rank, size):
    given = [a is not None for a in (job, rank, size)]
    if any(given) and not all(given):
        raise ValueError("mccl.init: give job, rank and size together, or "
                         "none of them")
    if not any(given) and not _launched():
        return Comm(None, "alone")
    if all(given):
        return Comm.create(job, rank, size)
    handle = ctypes.c_void_p()
    _check(_lib.load().mccl_comm_init_env(ctypes.byref(handle)), None)
    return Comm(handle, os.environ.get("MCCL_JOB", "env"))


def finalize():
    """Leave the world's job (also done at exit)."""
    global _world
    with _world_lock:
        w, _world = _world, None
    if w is not None:
        w.destroy(force=True)


atexit.register(finalize)

# dtype names as attributes: mccl.float32 and so on.
for _i, _n in enumerate(DTYPE_NAMES):
    globals()[_n] = _i
del _i, _n
