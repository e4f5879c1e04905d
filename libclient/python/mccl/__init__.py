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

import array
import atexit
import ctypes
import json
import os
import pickle
import threading
import weakref

from . import _cuda, _lib
from ._buffers import (BFLOAT16, DTYPE_NAMES, DTYPE_SIZES, FLOAT16,
                       FLOAT32, FLOAT64, INT8, INT32, INT64, UINT8, UINT32,
                       UINT64, dtype_code, like, view)

__all__ = ["init", "get_metrics", "Comm", "Request", "empty", "Error",
           "SUM", "PROD",
           "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR", "ANY_TAG",
           "ANY_SOURCE", "UNDEFINED"]

__version__ = "0.1.0"

# Reduction operations (mccl_op_t) and special values of mccl.h.
SUM, PROD, MIN, MAX, AVG, BAND, BOR, BXOR = range(8)
OP_NAMES = ("sum", "prod", "min", "max", "avg", "band", "bor", "bxor")
ANY_TAG = -1
ANY_SOURCE = -1
UNDEFINED = -1
_STATS_MAX = 256 * 1024		# a reply record (IPC_MSG_MAX) at most

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


class _Status(ctypes.Structure):
    """mccl_status_t: whose message a receive took, and its tag."""
    _fields_ = [("source", ctypes.c_int), ("tag", ctypes.c_int)]


class Request:
    """An operation in flight.  wait() returns its result (the output
    buffer, or None) and raises its error; test() says whether it is done,
    without blocking.  The buffers stay referenced until it completes.  A
    receive's .source and .tag say whose message it took, once done."""

    __slots__ = ("_comm", "_handle", "_result", "_bufs", "_done", "_error",
                 "_status")

    def __init__(self, comm, handle, result, bufs, status=None):
        self._comm = comm
        self._handle = handle
        self._result = result
        self._bufs = bufs
        self._done = handle is None
        self._error = None
        self._status = status

    @property
    def source(self):
        """A receive that ended well: the rank that sent; else None."""
        return self._status.source if self._done and self._status and \
            self._error is None else None

    @property
    def tag(self):
        """A receive that ended well: the message's tag; else None."""
        return self._status.tag if self._done and self._status and \
            self._error is None else None

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

    def _submit(self, fn, args, result, bufs, nonblocking, status=None):
        self._live()
        if self._handle is None:
            return Request(self, None, result, None, status) if \
                nonblocking else result
        if not nonblocking:
            _check(fn(*args, self._handle, None), self._handle)
            return result
        req = ctypes.c_void_p()
        _check(fn(*args, self._handle, ctypes.byref(req)), self._handle)
        return Request(self, req, result, bufs, status)

    @staticmethod
    def _op(op, b):
        """op (mccl.SUM ... or its name, "sum" ... "bxor"), checked against
        b's dtype as the C library checks it (the world of one has no
        library to ask)."""
        if isinstance(op, str) and op.lower() in OP_NAMES:
            op = OP_NAMES.index(op.lower())
        if not _pow_ok(op) or not 0 <= op < len(OP_NAMES):
            raise ValueError("mccl: op %r is not one of mccl.SUM, PROD, "
                             "MIN, MAX, AVG, BAND, BOR, BXOR or their names "
                             "(%s)" % (op, ", ".join(OP_NAMES)))
        floating = b.dtype >= FLOAT16
        if op == AVG and not floating:
            raise UnsupportedError("MCCL_AVG needs a floating-point dtype, "
                                   "not an integer one", UnsupportedError.code)
        if op >= BAND and floating:
            raise UnsupportedError("MCCL_%s needs an integer dtype, not a "
                                   "floating-point one" % OP_NAMES[op].upper(),
                                   UnsupportedError.code)
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
                                        self._op(op, b)), o.obj, (b, o), nb)

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
                                        self._op(op, b), root), o.obj, (b, o),
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
                                        self._op(op, b)), o.obj, (b, o), nb)

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

    def _gather(self, buf, out, root, dtype, nb):
        root = self._rank_arg(root, "root")
        b = view(buf, "buf", False, dtype)
        o = None
        if self.rank == root:
            shape = None
            if out is None and b.kind != "buffer":
                shape = (self.size,) + tuple(b.obj.shape)
            o = self._out(b, out, b.count * self.size, "out", shape, dtype)
            if self._handle is None:
                self._copy(o, b)
        return self._submit(_lib.load().mccl_gather if self._handle
                            else None, (b.ptr, o.ptr if o else None, b.count,
                                        b.dtype, root),
                            o.obj if o else None, (b, o), nb)

    def gather(self, buf, out=None, root=0, *, dtype=None):
        """On rank root: out = every rank's buf, rank 0's first (shape
        (size, ...)), returned; None elsewhere."""
        return self._gather(buf, out, root, dtype, False)

    def igather(self, buf, out=None, root=0, *, dtype=None):
        return self._gather(buf, out, root, dtype, True)

    def _scatter(self, buf, out, root, dtype, nb):
        root = self._rank_arg(root, "root")
        o = view(out, "out", True, dtype)
        b = None
        if self.rank == root:
            b = view(buf, "buf", False, dtype)
            if b.dtype != o.dtype or b.count != o.count * self.size:
                raise ValueError("mccl: scatter: buf holds %d %s elements, "
                                 "%d x %d %s needed" % (
                                     b.count, DTYPE_NAMES[b.dtype],
                                     self.size, o.count,
                                     DTYPE_NAMES[o.dtype]))
            if self._handle is None:
                self._copy(o, b)
        return self._submit(_lib.load().mccl_scatter if self._handle
                            else None, (b.ptr if b else None, o.ptr, o.count,
                                        o.dtype, root), o.obj, (b, o), nb)

    def scatter(self, buf, out, root=0, *, dtype=None):
        """out on rank r = block r of buf on rank root (size blocks of
        out's length); buf is not read elsewhere (may be None)."""
        return self._scatter(buf, out, root, dtype, False)

    def iscatter(self, buf, out, root=0, *, dtype=None):
        return self._scatter(buf, out, root, dtype, True)

    def _counts(self, counts, what):
        """A ctypes array of size element counts (or displacements)."""
        counts = list(counts)
        if len(counts) != self.size or \
                not all(_pow_ok(c) and c >= 0 for c in counts):
            raise ValueError("mccl: %s must be %d integers >= 0, got %r" %
                             (what, self.size, counts))
        return (ctypes.c_size_t * self.size)(*counts)

    @staticmethod
    def _displs(counts, displs):
        if displs is not None:
            return displs
        at, out = 0, []
        for c in counts:
            out.append(at)
            at += c
        return out

    def _allgatherv(self, buf, counts, out, displs, dtype, nb):
        b = view(buf, "buf", False, dtype)
        c = self._counts(counts, "counts")
        d = self._counts(self._displs(c, displs), "displs")
        if b.count != c[self.rank]:
            raise ValueError("mccl: allgatherv: buf holds %d elements, but "
                             "counts[%d] is %d" % (b.count, self.rank,
                                                   c[self.rank]))
        end = max((d[r] + c[r] for r in range(self.size) if c[r]),
                  default=0)
        o = self._out(b, out, end, "out", dtype=dtype) if out is None else \
            view(out, "out", True, dtype)
        if o.count < end:
            raise ValueError("mccl: allgatherv: out holds %d elements, %d "
                             "needed" % (o.count, end))
        if self._handle is None and b.nbytes:
            ctypes.memmove(o.ptr + d[0] * DTYPE_SIZES[b.dtype], b.ptr,
                           b.nbytes)
        return self._submit(_lib.load().mccl_allgatherv if self._handle
                            else None, (b.ptr, b.count, o.ptr, c, d,
                                        b.dtype), o.obj, (b, o, c, d), nb)

    def allgatherv(self, buf, counts, out=None, displs=None, *,
                   dtype=None):
        """Every rank's buf (counts[r] elements from rank r, the same counts
        on every rank) into out at displs[r] (default: side by side);
        returns out (1-D, new when None)."""
        return self._allgatherv(buf, counts, out, displs, dtype, False)

    def iallgatherv(self, buf, counts, out=None, displs=None, *,
                    dtype=None):
        return self._allgatherv(buf, counts, out, displs, dtype, True)

    def _alltoallv(self, buf, sendcounts, out, recvcounts, sdispls,
                   rdispls, dtype, nb):
        b = view(buf, "buf", False, dtype)
        o = view(out, "out", True, dtype)
        if o.dtype != b.dtype:
            raise TypeError("mccl: alltoallv: out is %s, buf %s" % (
                DTYPE_NAMES[o.dtype], DTYPE_NAMES[b.dtype]))
        sc = self._counts(sendcounts, "sendcounts")
        rc = self._counts(recvcounts, "recvcounts")
        sd = self._counts(self._displs(sc, sdispls), "sdispls")
        rd = self._counts(self._displs(rc, rdispls), "rdispls")
        for what, bb, c, d in (("buf", b, sc, sd), ("out", o, rc, rd)):
            end = max((d[r] + c[r] for r in range(self.size) if c[r]),
                      default=0)
            if bb.count < end:
                raise ValueError("mccl: alltoallv: %s holds %d elements, %d "
                                 "needed" % (what, bb.count, end))
        if self._handle is None and sc[0]:
            if sc[0] != rc[0]:
                raise ValueError("mccl: alltoallv: rank 0 sends itself %d "
                                 "elements but expects %d" % (sc[0], rc[0]))
            es = DTYPE_SIZES[b.dtype]
            ctypes.memmove(o.ptr + rd[0] * es, b.ptr + sd[0] * es,
                           sc[0] * es)
        return self._submit(_lib.load().mccl_alltoallv if self._handle
                            else None, (b.ptr, sc, sd, o.ptr, rc, rd,
                                        b.dtype), o.obj,
                            (b, o, sc, sd, rc, rd), nb)

    def alltoallv(self, buf, sendcounts, out, recvcounts, sdispls=None,
                  rdispls=None, *, dtype=None):
        """sendcounts[j] elements of buf (at sdispls[j], default side by
        side) go to rank j and land in its out at its rdispls[r], r being
        the sender; recvcounts must match the senders' counts.  Returns
        out."""
        return self._alltoallv(buf, sendcounts, out, recvcounts, sdispls,
                               rdispls, dtype, False)

    def ialltoallv(self, buf, sendcounts, out, recvcounts, sdispls=None,
                   rdispls=None, *, dtype=None):
        return self._alltoallv(buf, sendcounts, out, recvcounts, sdispls,
                               rdispls, dtype, True)

    # -- Python objects, pickled (mpi4py's bcast/gather/... by other
    #    names: ours take buffers) --

    def bcast_obj(self, obj, root=0):
        """Rank root's obj, on every rank."""
        root = self._rank_arg(root, "root")
        data = _pickle(obj) if self.rank == root else b""
        n = array.array("q", [len(data)])
        self.broadcast(n, root=root)
        buf = bytearray(data) if self.rank == root else bytearray(int(n[0]))
        self.broadcast(buf, root=root, dtype=UINT8)
        return _unpickle(buf, int(n[0]))

    def allgather_obj(self, obj):
        """Every rank's obj, as a list in rank order."""
        data = _pickle(obj)
        counts = list(self.allgather(array.array("q", [len(data)])))
        out = self.allgatherv(bytearray(data), counts,
                              bytearray(sum(counts)), dtype=UINT8)
        return _unpickle_all(out, counts)

    def gather_obj(self, obj, root=0):
        """On rank root, every rank's obj as a list in rank order; None
        elsewhere.  Each is padded to the largest (one gather)."""
        root = self._rank_arg(root, "root")
        data = _pickle(obj)
        sizes = list(self.allgather(array.array("q", [len(data)])))
        most = max(sizes)
        buf = bytearray(data) + bytearray(most - len(data))
        out = bytearray(most * self.size) if self.rank == root else None
        self.gather(buf, out, root=root, dtype=UINT8)
        if self.rank != root:
            return None
        return [_unpickle(memoryview(out)[r * most:], sizes[r])
                for r in range(self.size)]

    def scatter_obj(self, objs, root=0):
        """Element r of objs (a sequence of size objects on rank root) on
        rank r.  Each is padded to the largest (one scatter)."""
        root = self._rank_arg(root, "root")
        sizes = array.array("q", [0] * self.size)
        parts = None
        if self.rank == root:
            objs = list(objs)
            if len(objs) != self.size:
                raise ValueError("mccl: scatter_obj: %d objects for %d "
                                 "ranks" % (len(objs), self.size))
            parts = [_pickle(o) for o in objs]
            sizes = array.array("q", [len(p) for p in parts])
        self.broadcast(sizes, root=root)
        most = max(sizes)
        buf = None
        if self.rank == root:
            buf = b"".join(p + bytes(most - len(p)) for p in parts)
        out = bytearray(most)
        self.scatter(buf, out, root=root, dtype=UINT8)
        return _unpickle(out, sizes[self.rank])

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
        b = view(buf, "buf", what == "recv", dtype)
        if what != "recv" or peer != ANY_SOURCE:
            peer = self._rank_arg(peer, "peer")
        if not _pow_ok(tag) or tag < (-1 if what == "recv" else 0):
            raise ValueError("mccl: tag %r: a send needs a tag >= 0, a "
                             "receive one >= 0 or mccl.ANY_TAG" % (tag,))
        if what == "send":
            return self._submit(_lib.load().mccl_send, (b.ptr, b.count,
                                b.dtype, peer, tag), None, (b,), nb)
        st = _Status(-1, -1)
        return self._submit(_lib.load().mccl_recv_status,
                            (b.ptr, b.count, b.dtype, peer, tag,
                             ctypes.byref(st)), b.obj, (b, st), nb, st)

    def send(self, buf, dest, tag=0, *, dtype=None):
        """Send buf to rank dest; returns once the daemon has it."""
        return self._p2p(buf, dest, tag, dtype,
                         "send", False)

    def isend(self, buf, dest, tag=0, *, dtype=None):
        return self._p2p(buf, dest, tag, dtype,
                         "send", True)

    def recv(self, buf, source, tag=ANY_TAG, *, dtype=None):
        """Receive into buf the first message from rank source (or from
        anyone: mccl.ANY_SOURCE) whose tag matches; returns buf.  irecv's
        Request says the sender and tag."""
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

    def set_timeout(self, seconds):
        """Every later operation fails with mccl.TimeoutError once it has
        waited this long for another rank (0 or None: the daemon's
        op_timeout_ms)."""
        ms = 0 if not seconds else int(round(seconds * 1000))
        if ms < 0 or ms > 2 ** 31 - 1:
            raise ValueError("mccl: set_timeout(%r): expected 0 to %d "
                             "seconds" % (seconds, (2 ** 31 - 1) // 1000))
        self._live()
        if self._handle is not None:
            _check(_lib.load().mccl_comm_set_timeout(self._handle, ms),
                   self._handle)

    def set_wire_dtype(self, wire):
        """What this communicator's float32 sums and averages (allreduce,
        reduce, reduce_scatter) send between nodes: "fp32" (as they are, the default), "bf16" or
        "fp16" (half the bytes, summed in float32 on every node; see
        mccl_comm_set_wire_dtype in mccl.h for the error bound).  Also
        torch's or numpy's dtypes, and MCCL's dtype names and codes."""
        code = wire_code(wire)
        self._live()
        if self._handle is not None:
            _check(_lib.load().mccl_comm_set_wire_dtype(self._handle, code),
                   self._handle)

    def stats(self):
        """The daemons' view of this job, as a dict (mcclctl -j job)."""
        self._live()
        if self._handle is None:	# no daemon: nothing to count
            return {"name": self.job, "nranks": 1, "nnodes": 0,
                    "state": "alone", "nodes": []}
        buf = ctypes.create_string_buffer(_STATS_MAX)
        _check(_lib.load().mccl_comm_stats(self._handle, buf, len(buf)),
               self._handle)
        return json.loads(buf.value.decode())

    def abort(self):
        """End every pending operation of the job, on every rank, with
        mccl.AbortedError."""
        if self._handle is not None:
            _check(_lib.load().mccl_comm_abort(self._handle), self._handle)

    def destroy(self, force=False):
        """Leave the job.  Memory from mccl.empty() on this communicator
        dies with it, so destroy() refuses while such arrays live, unless
        force (what the interpreter's exit does)."""
        if self._handle is None or getattr(self, "_borrowed", False):
            self._handle = None
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

    def _release(self):
        """The handle, which the caller now owns (mccl.torch's native
        groups destroy theirs); this Comm is then a destroyed one."""
        with self._lock:
            handle, self._handle = self._handle.value, None
            self._destroyed = True
        return handle

    @classmethod
    def _borrow(cls, handle, job):
        """A Comm over a handle another owns (a native torch group's):
        destroying it only forgets the handle."""
        comm = cls(ctypes.c_void_p(handle), job)
        comm._borrowed = True
        return comm

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            try:
                self.destroy(force=True)
            except Exception:
                pass

# ---- pickled objects ----


def _pickle(obj):
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _unpickle(buf, size):
    return pickle.loads(bytes(memoryview(buf)[:size]))


def _unpickle_all(buf, sizes):
    out, at = [], 0
    for s in sizes:
        out.append(_unpickle(memoryview(buf)[at:], s))
        at += s
    return out

# CUDA buffers, through a host copy (_cuda.py): every buffer collective.
for _name in ("allreduce", "broadcast", "reduce", "allgather",
              "reduce_scatter", "alltoall", "gather", "scatter",
              "allgatherv", "alltoallv", "send", "recv"):
    for _nb in (False, True):
        _full = ("i" if _nb else "") + _name
        setattr(Comm, _full, _cuda.staged(getattr(Comm, _full), _nb,
                                           copy_back=_name != "send"))
del _name, _nb, _full

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


def init(job=None, rank=None, size=None, wire_dtype=None):
    """The world communicator.  With job, rank and size: that job.  Else
    from the launcher's environment (MCCL_JOB/MCCL_RANK/MCCL_NRANKS,
    torchrun, Slurm, Open MPI); with none, a world of one rank that needs
    no daemon.  The first call makes it; later calls return it.
    wire_dtype: Comm.set_wire_dtype's, for it (else MCCL_WIRE_DTYPE's)."""
    global _world
    with _world_lock:
        if _world is None or _world._destroyed:
            _world = _make_world(job, rank, size)
        elif job is not None and job != _world.job:
            raise InvalidArgumentError(
                "mccl.init(job=%r): this process is already in job %r" %
                (job, _world.job), InvalidArgumentError.code)
        if wire_dtype is not None:
            _world.set_wire_dtype(wire_dtype)
        return _world


_WIRE_ALIASES = {"fp32": FLOAT32, "bf16": BFLOAT16, "fp16": FLOAT16}


def wire_code(wire):
    """The dtype code of a wire format: float32, bfloat16 or float16, by
    alias (fp32, bf16, fp16), MCCL name or code, or torch or numpy dtype."""
    code = _WIRE_ALIASES.get(wire) if isinstance(wire, str) else None
    if code is None:
        try:
            code = dtype_code(wire)
        except TypeError:
            code = None
    if code not in (FLOAT32, BFLOAT16, FLOAT16):
        raise ValueError("mccl: wire dtype %r: expected fp32, bf16 or fp16"
                         % (wire,))
    return code


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


def get_metrics(comm=None):
    """The daemons' counters for comm's job (default: the world) as a dict:
    its state, ranks and nodes, operations completed and in flight, by
    node (Comm.stats)."""
    return (comm if comm is not None else init()).stats()


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
