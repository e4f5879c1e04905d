"""torch.distributed backend "mccl".

    import mccl.torch                     # registers the backend
    torch.distributed.init_process_group("mccl")   # torchrun, mcclrun

The backend is mccl._native's ProcessGroupMCCL, in C++ (libclient/torch),
where make or pip built it for the torch running; elsewhere, or with
MCCL_TORCH_NATIVE=0, the ProcessGroup below, written in Python (torch's
ProcessGroup, subclassed), with the same semantics.  One
MCCL job per group: the group's rank 0 names the job in the group's store,
so the default group and every new_group meet in their own job.  Each
operation returns a Work over a torch Future, whose wait() raises the
operation's error.  Two threads per group keep the caller from waiting:
one submits, in the order of the calls, the operations that must wait
(CUDA tensors until their copies to the host end, CPU tensors of 1 MiB
and more, whose copy into the library's staging memory then runs beside
backward); the other waits for the operations in order, copies results
back where a tensor could not be used in place, and completes the
futures.  DDP's gradient allreduces so run on the daemon while backward
goes on.

Tensors on the CPU are used in place (a non-contiguous one is copied
into a contiguous one and the result copied back).  CUDA tensors go
through host memory the daemon shares, page-locked for the GPU
(_HostStaging): the copies to the host are queued on the caller's current
stream, and the operation is submitted once they ended (an event; the
caller does not wait); the copies back are queued on that same stream once
it completes, before its future completes (DDP's callbacks run on that
stream), and Work.wait() makes the waiting stream wait for them without
blocking on the GPU.  all_reduce, broadcast and reduce of 32 MiB and more,
on any device, run in parts of 16 MiB: each part is submitted as its copy
out (CUDA) or into the library's staging memory (CPU) ends, and copied
back as it completes, so copies and network overlap.

Reductions: SUM, PRODUCT, MIN, MAX, AVG on floating-point tensors, BAND,
BOR and BXOR on integer ones; PREMUL_SUM is refused with a clear error.  all_gather and all_to_all take
uneven sizes (allgatherv, alltoallv); a sparse all_reduce sums as gloo's
does; recv takes a message from any source; the group's timeout is every
operation's deadline.

A narrower wire for float32 gradients: MCCL_WIRE_DTYPE=bf16 (or fp16) in
the ranks' environment, or set_wire_dtype("bf16", group) after
init_process_group: float32 sums and averages (DDP's buckets' all_reduces,
reduce, reduce_scatter) then cross the network as bfloat16, summed in
float32 on every node.
"""

import collections
import ctypes
import os
import functools
import inspect
import itertools
import queue
import sys
import threading
import uuid
import weakref

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup, ReduceOp, Work
from torch.futures import Future

import mccl
from mccl import _lib

try:
    from torch.distributed.constants import default_pg_timeout as \
        _TORCH_DEFAULT_TIMEOUT
except ImportError:		# it has always been there, but is not public
    _TORCH_DEFAULT_TIMEOUT = None

_OPS = {ReduceOp.SUM: mccl.SUM, ReduceOp.PRODUCT: mccl.PROD,
        ReduceOp.MIN: mccl.MIN, ReduceOp.MAX: mccl.MAX,
        ReduceOp.AVG: mccl.AVG, ReduceOp.BAND: mccl.BAND,
        ReduceOp.BOR: mccl.BOR, ReduceOp.BXOR: mccl.BXOR}
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _op_name(reduce_op):
    """ReduceOp.X's name: torch prints some ops as an object's address."""
    for name in ("SUM", "PRODUCT", "MIN", "MAX", "AVG", "BAND", "BOR",
                 "BXOR", "PREMUL_SUM"):
        if reduce_op == getattr(ReduceOp, name, None):
            return "ReduceOp." + name
    return repr(reduce_op)


def _op(reduce_op, dtype):
    for k, v in _OPS.items():
        if reduce_op == k:
            if v == mccl.AVG and dtype not in _FLOATS:
                raise ValueError("mccl: ReduceOp.AVG needs a floating-point "
                                 "tensor, not %s" % dtype)
            if v >= mccl.BAND and (dtype in _FLOATS or dtype.is_complex):
                raise ValueError("mccl: %s needs an integer tensor, not %s"
                                 % (_op_name(reduce_op), dtype))
            return v
    raise ValueError("mccl: reduce op %s is not supported (SUM, PRODUCT, "
                     "MIN, MAX, AVG, BAND, BOR and BXOR are)" %
                     _op_name(reduce_op))


def _flat(t):
    """A contiguous tensor to run on: t itself, or a copy (copied back by
    the caller).  CUDA tensors were replaced by host ones (_staged)."""
    if t.device.type != "cpu":
        raise ValueError("mccl: a tensor on %s; the mccl backend works on "
                         "CPU and CUDA tensors" % t.device)
    return t if t.is_contiguous() else t.contiguous()


class _HostStaging:
    """A group's host memory for CUDA tensors: mccl.empty segments, which
    the daemon reads and writes in place, page-locked for the GPU
    (cudaHostRegister) so that copies run by DMA and asynchronously.
    Buffers come in powers of two from 1 MiB and are reused: the copies
    into a buffer taken again wait, on the GPU, for the last copies from
    it.  Every buffer is kept until close(): the pool holds what the most
    operations in flight at once needed, and a training step that needs
    as many again finds them (making and page-locking one costs more than
    the copies it serves: DDP's buckets, all of one size, went beyond any
    fixed count kept per size).
    Where the daemon's segments run out, torch's pinned memory (the
    library then copies it once more)."""

    MIN = 1 << 20

    def __init__(self, comm):
        self._comm = comm
        self._lock = threading.Lock()
        self._free = {}		# size: [(buffer, event or None)]
        self._registered = {}	# data_ptr: buffer
        self.fallback = None	# why segments were not used, once
        self.made = 0		# buffers made so far

    def take(self, nbytes):
        """A buffer of nbytes or more, and the event after the last copies
        from it (None for a new one): the stream that copies into it
        waits for that event, the caller does not."""
        size = self.MIN
        while size < nbytes:
            size *= 2
        with self._lock:
            free = self._free.get(size)
            buf, event = free.pop() if free else (None, None)
        return (buf, event) if buf is not None else (self._new(size), None)

    def give(self, buf, event):
        with self._lock:
            self._free.setdefault(buf.numel(), []).append((buf, event))

    def _new(self, size):
        with self._lock:
            self.made += 1
        try:
            buf = mccl.empty(size, torch.uint8, comm=self._comm)
        except mccl.Error as e:
            self.fallback = self.fallback or str(e)
            return torch.empty(size, dtype=torch.uint8, device="cpu",
                               pin_memory=True)
        rc = torch.cuda.cudart().cudaHostRegister(buf.data_ptr(), size, 0)
        if int(rc) == 0:
            with self._lock:
                self._registered[buf.data_ptr()] = buf
        else:
            self.fallback = self.fallback or \
                "cudaHostRegister failed (%s)" % rc
        return buf

    def close(self):
        """Unpin everything, before the segments go with the comm."""
        with self._lock:
            ptrs, self._registered, self._free = \
                list(self._registered), {}, {}
        if ptrs:
            torch.cuda.synchronize()
        for ptr in ptrs:
            torch.cuda.cudart().cudaHostUnregister(ptr)


_PART = 16 << 20	# bytes: large all_reduces etc. go in parts of this


def _part_bounds(t):
    """The element ranges a tensor of two parts or more is cut into, the
    same on every device (a job's ranks must run the same operations);
    None for a smaller one.  The last part takes the remainder (one to two
    parts' worth), as the daemon's segments do: a sliver of its own (DDP's
    buckets are a little over whole MiBs) would be an operation too small
    for the daemon to overlap with the parts around it."""
    n, size = t.numel(), t.element_size()
    if n * size < 2 * _PART:
        return None
    step = _PART // size
    k = n // step
    return [(i * step, (i + 1) * step if i + 1 < k else n) for i in range(k)]


class _Stage:
    """One operation's CUDA tensors and their host mirrors: copied to the
    host on the caller's current stream (out), and back on it (back).  A
    contiguous tensor of two parts or more is copied out part by part, an
    event after each, so that its parts can be submitted as their copies
    end and copied back as each completes (pipelined)."""

    def __init__(self, staging, device):
        self._staging = staging
        self.device = device
        self.stream = torch.cuda.current_stream(device)
        self.copied = None		# the event after every copy out
        self.done = None		# the event after the copies back
        self._pairs = []		# (CUDA tensor, host mirror, buffer)
        self._user = {}			# id(host mirror): CUDA tensor
        self._parts = {}		# id(host mirror): [(lo, hi, event)]
        self._back_done = set()		# id(host mirror): copied back by parts

    def mirror(self, t, out, back):
        """t's host mirror; out: t's data copied there, back: the mirror
        copied back into t once the operation completes."""
        if t.device != self.device:
            raise ValueError("mccl: tensors on %s and %s in one operation"
                             % (self.device, t.device))
        if t.is_sparse:		# indices and values: a plain copy
            host, buf = t.cpu(), None
        else:
            nbytes = t.numel() * t.element_size()
            buf, reused = self._staging.take(nbytes)
            if reused is not None:	# its last copies back end first
                self.stream.wait_event(reused)
            host = buf[:nbytes].view(t.dtype).view(t.shape)
            if out:
                self._copy_out(t, host, nbytes)
        self._pairs.append((t if back else None, host, buf))
        self._user[id(host)] = t
        return host

    def _copy_out(self, t, host, nbytes):
        bounds = _part_bounds(t)
        if bounds is None or not t.is_contiguous():
            host.copy_(t, non_blocking=True)
            return
        src, dst, events = t.view(-1), host.view(-1), []
        for lo, hi in bounds:
            dst[lo:hi].copy_(src[lo:hi], non_blocking=True)
            events.append(torch.cuda.Event())
            events[-1].record(self.stream)
        self._parts[id(host)] = events

    def parts(self, host):
        """The event after each part's copy out (_part_bounds), or None
        where host was copied out whole."""
        return self._parts.get(id(host))

    def copy_out_ended(self):
        """The event the operation's submission waits for: the copies to
        the host done, and the work queued before them."""
        self.copied = torch.cuda.Event()
        self.copied.record(self.stream)

    def back_part(self, host, lo, hi):
        """A closure queueing the copy back of host's elements lo to hi
        (the part of a pipelined operation that completed)."""
        t = self._user[id(host)]
        self._back_done.add(id(host))

        def copy_back():
            with torch.cuda.stream(self.stream):
                t.view(-1)[lo:hi].copy_(host.view(-1)[lo:hi],
                                        non_blocking=True)
        return copy_back

    def back(self):
        """Queue the copies back; the buffers return once they ran."""
        with torch.cuda.stream(self.stream):
            for t, host, _ in self._pairs:
                if t is not None and id(host) not in self._back_done:
                    t.copy_(host, non_blocking=True)
            self.done = torch.cuda.Event()
            self.done.record(self.stream)
        for _, _, buf in self._pairs:
            if buf is not None:
                self._staging.give(buf, self.done)
        self._pairs = []

    def release(self):
        """The operation never ran, or its parts failed: the buffers go
        back once the copies queued from them ended."""
        event = torch.cuda.Event()
        event.record(self.stream)
        for _, _, buf in self._pairs:
            if buf is not None:
                self._staging.give(buf, event)
        self._pairs = []

    def user(self, value):
        """value with each host mirror replaced by its CUDA tensor."""
        if isinstance(value, torch.Tensor):
            return self._user.get(id(value), value)
        if isinstance(value, (list, tuple)):
            return type(value)(self.user(v) for v in value)
        return value


def _map_tensors(value, fn):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value


def _cuda_device(args):
    """The device of the first CUDA tensor in args, else None (the CPU
    path's one cost: no allocation)."""
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.is_cuda:
                return a.device
        elif isinstance(a, (list, tuple)):
            d = _cuda_device(a)
            if d is not None:
                return d
    return None


def _staged(outputs=None, inplace=True, reads_host=False):
    """A collective that takes CUDA tensors: they are replaced by host
    mirrors for the CPU code.  The argument at index outputs is written
    only: not copied out, copied back; without one, every tensor is
    copied out, and back if inplace.  The operation is submitted once the
    copies out ended (_Submitter), without blocking the caller, unless
    the method reads the mirrors itself (reads_host: torch.cat of its
    inputs), which then waits for them.  The Work copies back
    (_Completer)."""
    def wrap(method):
        @functools.wraps(method)
        def run(self, *args):
            device = _cuda_device(args)
            if device is None:
                return method(self, *args)
            stage = _Stage(self._host_staging(), device)
            try:
                host = [_map_tensors(a, lambda t, i=i: stage.mirror(
                    t, i != outputs, i == outputs or (outputs is None and
                                                      inplace))
                    if t.is_cuda else t) for i, a in enumerate(args)]
                stage.copy_out_ended()
                if reads_host:
                    stage.copied.synchronize()
                self._local.stage = stage
                return method(self, *host)
            except BaseException:
                stage.release()
                raise
            finally:
                self._local.stage = None
        return run
    return wrap


class _Work(Work):
    """A Work over an operation's source future (src), completed with the
    tensors or _Failed.  wait() raises the operation's own error (an
    mccl.Error); the future torch gets (get_future) carries it as a C++
    error, which torch raises as a RuntimeError naming it, from
    Future.wait(), DDP's backward and every other caller.  torch's C++
    reaches these methods only while this Python object lives, so its
    group keeps it (_Keep) until long after it completed."""

    def __init__(self, src, source=None, stage=None):
        super().__init__()
        self._src = src
        self._fut = src.then(_unwrap)
        self._source = source	# a receive from any source: its Request
        self._stage = stage	# CUDA tensors: their copies back

    def _error(self):
        value = self._src.value()
        return value.error if isinstance(value, _Failed) else None

    def wait(self, timeout=None):
        self._src.wait()
        error = self._error()
        if error is not None:
            raise error
        self.synchronize()
        return True

    def is_completed(self):
        return self._src.done()

    def is_success(self):
        return self._src.done() and self._error() is None

    def exception(self):
        return self._error() if self._src.done() else None

    def get_future(self):
        return self._fut

    def result(self):
        self.wait()
        return self._src.value()

    def _source_rank(self):
        """recv_anysource's: who sent (torch's dist.recv returns it)."""
        self.wait()
        source = self._source
        return (source.get() if isinstance(source, _Deferred)
                else source).source

    def synchronize(self):
        """The caller's current stream waits for the copies back (CUDA);
        the CPU does not wait for the GPU."""
        if self._stage is not None and self._stage.done is not None:
            torch.cuda.current_stream(self._stage.device).wait_event(
                self._stage.done)


class _Keep:
    """The group's Works: each pending one, and the last KEEP completed
    (C++ callers wait on or take the future of a Work as soon as they
    get it, so a completed Work is soon needed by no one but its own
    Python holder, who keeps it alive anyway)."""

    KEEP = 4096

    def __init__(self):
        self._lock = threading.Lock()
        self._pending = set()
        self._done = collections.deque(maxlen=self.KEEP)

    def add(self, work):
        with self._lock:
            self._pending.add(work)

    def completed(self, work):
        with self._lock:
            self._pending.discard(work)
            self._done.append(work)


class _Failed:
    """What a failed operation's source future holds: its error."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


def _unwrap(src):
    """The callback between an operation's source future and the future
    torch sees: it raises a failure, so that torch records it as the
    future's error in C++.  (Future.set_exception stores the exception as
    an ordinary value, with a Python-only unwrap: DDP's reducer, in C++,
    then took it for its gradients and crashed.)"""
    value = src.value()
    if isinstance(value, _Failed):
        raise value.error
    return value


class _Deferred:
    """The request of an operation the group's _Submitter submits later:
    get() waits for it, or raises what its submission raised."""

    __slots__ = ("_ready", "_req", "_error")

    def __init__(self):
        self._ready = threading.Event()
        self._req = None
        self._error = None

    def set(self, req, error=None):
        self._req, self._error = req, error
        self._ready.set()

    def get(self):
        # No deadline of its own: the submitter sets every one it takes,
        # once the GPU ends the copies it waits for (see _Submitter).
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self._req


class _Submitter(threading.Thread):
    """Submits, in the order they were called, a group's operations that
    must not block their caller: those on CUDA tensors, each once the
    copies of its tensors to the host ended (an event: the caller, DDP's
    autograd thread among them, goes on queueing GPU work meanwhile);
    large ones on CPU tensors, so that the library's copy into its
    staging memory, where it stages them rather than letting the daemon
    read them in place, runs here, beside backward; and every operation
    called while any is queued here, since a job's collectives meet by
    their order.  Its waits on the GPU have no deadline: a GPU that never ends
    the work queued before a collective would hang torch alike."""

    DEFER_BYTES = 1 << 20	# CPU operations this large are submitted here

    def __init__(self, name):
        super().__init__(name="mccl-submit-" + name, daemon=True)
        self._queue = queue.SimpleQueue()
        self._idle = threading.Condition()
        self.queued = 0		# read without the lock: an int, atomic

    def put(self, event, fn, args, kw):
        deferred = _Deferred()
        with self._idle:
            self.queued += 1
        self._queue.put((event, fn, args, kw, deferred))
        return deferred

    def drain(self):
        """Return once every operation queued so far was submitted."""
        with self._idle:
            self._idle.wait_for(lambda: self.queued == 0)

    def stop(self):
        self._queue.put(None)

    def run(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            event, fn, args, kw, deferred = item
            try:
                if event is not None:
                    event.synchronize()
                deferred.set(fn(*args, **kw))
            except Exception as e:	# noqa: BLE001 (the Work raises it)
                deferred.set(None, e)
            with self._idle:
                self.queued -= 1
                self._idle.notify_all()


def _large(t):
    return isinstance(t, torch.Tensor) and \
        t.numel() * t.element_size() >= _Submitter.DEFER_BYTES


def _wait_parts(parts):
    """Wait for each (request, on_done) of an operation in turn, calling
    on_done once its request ended well; the first error, after every
    request ended (the daemon may use their buffers until then)."""
    error = None
    for req, on_done in parts:
        try:
            if isinstance(req, _Deferred):
                req = req.get()
            if req is not None:
                req.wait()
            if on_done is not None and error is None:
                on_done()
        except Exception as e:	# noqa: BLE001 (handed to the future)
            error = error or e
    return error


class _Completer(threading.Thread):
    """Waits for a group's operations in order and completes their
    futures: first the copies back, then the future, with the tensors as
    its value (what DDP's communication hooks expect) or the error."""

    def __init__(self, name):
        super().__init__(name="mccl-" + name, daemon=True)
        self.queue = queue.SimpleQueue()

    def run(self):
        while True:
            item = self.queue.get()
            if item is None:
                return
            parts, after, fut, value, done, stage = item
            error = _wait_parts(parts)
            if error is None and after is not None:
                try:
                    after()
                except Exception as e:	# noqa: BLE001 (to the future)
                    error = e
            if error is not None:
                if stage is not None:
                    stage.release()
                fut.set_result(_Failed(error))
            elif stage is None:
                fut.set_result(value)
            else:	# then-callbacks (DDP's) run after the copies back
                stage.back()
                with torch.cuda.stream(stage.stream):
                    fut.set_result(stage.user(value))
            done()


class ProcessGroupMCCL(ProcessGroup):
    """One MCCL communicator per group (see the module documentation)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._comm = _join(store, rank, size, timeout)
        # A timeout= given is every operation's deadline; torch's default
        # (30 min) leaves MCCL's (MCCL_OP_TIMEOUT_MS, or op_timeout_ms).
        if timeout and timeout != _TORCH_DEFAULT_TIMEOUT:
            self._comm.set_timeout(timeout.total_seconds())
        self._keep = _Keep()
        self._completer = _Completer(self._comm.job)
        self._completer.start()
        self._submitter = _Submitter(self._comm.job)
        self._submitter.start()
        self._local = threading.local()	# .stage: a CUDA op being made
        self._staging = []		# its _HostStaging, once needed
        self._group_name = ""
        self._end = weakref.finalize(self, _shutdown, self._submitter,
                                     self._completer, self._comm,
                                     self._staging)

    def getBackendName(self):
        return BACKEND_NAME

    # torch 2 keeps a ProcessGroup its plugin returns as the group itself,
    # with no per-device backend registered, and asks the group for one when
    # init_process_group is given device_id (to connect it eagerly, which
    # this one need not: supports_splitting is False).  This group is the
    # backend of every device it takes.
    supports_splitting = False

    def _get_backend(self, device):
        if torch.device(device).type not in ("cpu", "cuda"):
            raise RuntimeError("mccl: no backend for device %s (cpu and "
                               "cuda only)" % (device,))
        return self

    def _get_backend_name(self):
        return BACKEND_NAME

    # torch 2 names a group through its per-device backends, and this group
    # has none (above): it keeps its name itself, or destroy_process_group
    # fails reading it ("ProcessGroup name not set").
    def _set_group_name(self, name):
        self._group_name = name

    @property
    def group_name(self):
        return self._group_name

    def shutdown(self):
        """The group's job ends now (torch 2's destroy_process_group calls
        this), not when the object is collected; again: nothing."""
        self._end()

    # -- the path every operation takes --

    def _host_staging(self):
        if not self._staging:
            self._staging.append(_HostStaging(self._comm))
        return self._staging[0]

    def _issue(self, fn, *args, **kw):
        """fn(*args, **kw), a Comm's non-blocking call: its request, or a
        _Deferred where the _Submitter must submit it."""
        stage = getattr(self._local, "stage", None)
        return self._issue_after(None if stage is None else stage.copied,
                                 fn, args, kw)

    def _issue_after(self, event, fn, args, kw):
        """The same, once the GPU passed event (None: at once)."""
        if event is None and self._submitter.queued == 0 and \
                not (args and _large(args[0])):
            return fn(*args, **kw)
        return self._submitter.put(event, fn, args, kw)

    def _in_order(self):
        """Before a blocking call on the comm, or a change to it: every
        operation called before is submitted."""
        if self._submitter.queued:
            self._submitter.drain()

    def _work(self, req, value, after=None, source=None, parts=None):
        """The Work of an operation: its request (or its parts, each a
        (request, on_done) pair), completed by the _Completer."""
        src = Future()
        stage = getattr(self._local, "stage", None)
        work = _Work(src, source, stage)
        self._keep.add(work)
        self._completer.queue.put((parts or ((req, None),), after, src,
                                   value,
                                   lambda: self._keep.completed(work),
                                   stage))
        return work

    def _elementwise(self, fn, tensors, t, **kw):
        """fn (allreduce, broadcast or reduce: each element of the result
        depends on that element alone) on t.  From two parts (_PART) on,
        one operation per part: each is submitted once its data is there
        (a CUDA part's copy out ended; a CPU part that the library stages
        is copied into its staging memory while the part before is on the
        network, one that the daemon reads in place goes at once) and
        copied back as it completes."""
        w = _flat(t)
        bounds = _part_bounds(w)
        if bounds is None:
            req = self._issue(fn, w, **kw)
            return self._work(req, tensors, self._back([(w, t)]))
        stage = getattr(self._local, "stage", None)
        events = stage.parts(t) if stage is not None else None
        flat, parts = w.view(-1), []
        for k, (lo, hi) in enumerate(bounds):
            if events is not None:
                event, done = events[k], stage.back_part(t, lo, hi)
            else:	# on the CPU, or a CUDA tensor copied out whole
                event, done = getattr(stage, "copied", None), None
            parts.append((self._issue_after(event, fn, (flat[lo:hi],), kw),
                          done))
        return self._work(None, tensors, self._back([(w, t)]), parts=parts)

    @staticmethod
    def _back(pairs):
        """A closure copying each (work tensor, user tensor) pair back."""
        pairs = [(w, u) for w, u in pairs if w.data_ptr() != u.data_ptr()]
        if not pairs:
            return None

        def copy_back():
            for w, u in pairs:
                u.copy_(w.view_as(u) if w.shape != u.shape else w)
        return copy_back

    def _one(self, tensors, what):
        if len(tensors) != 1:
            raise ValueError("mccl: %s takes one tensor per process, got %d"
                             % (what, len(tensors)))
        return tensors[0]

    # -- collectives --

    @_staged()
    def allreduce(self, tensors, opts=None):
        t = self._one(tensors, "allreduce")
        op = _op(opts.reduceOp if opts is not None else ReduceOp.SUM,
                 t.dtype)
        if t.is_sparse:
            return self._allreduce_sparse(t, op, tensors)
        return self._elementwise(self._comm.iallreduce, tensors, t, op=op)

    def _allreduce_sparse(self, t, op, tensors):
        """As gloo: every rank's indices and values gathered, then summed
        here (coalesce), the same on every rank.  SUM only."""
        if op != mccl.SUM:
            raise ValueError("mccl: all_reduce of a sparse tensor sums only, "
                             "not %s" % mccl.OP_NAMES[op])
        self._in_order()
        c = t.coalesce()
        idx = c.indices().t().contiguous()	# nnz rows of ndim
        val = c.values().contiguous()		# nnz rows of the rest
        nnz = [int(x) for x in self._comm.allgather(
            torch.tensor([idx.shape[0]], dtype=torch.int64,
                         device="cpu")).view(-1)]
        ndim, row = idx.shape[1], val.shape[1:].numel()
        all_idx = self._comm.allgatherv(idx.view(-1),
                                        [k * ndim for k in nnz])
        all_val = self._comm.allgatherv(val.view(-1), [k * row for k in nnz])
        total = torch.sparse_coo_tensor(
            all_idx.view(-1, ndim).t(), all_val.view(-1, *val.shape[1:]),
            t.shape).coalesce()
        t.copy_(total)
        return self._work(None, tensors)

    @_staged(reads_host=True)
    def allreduce_coalesced(self, tensors, opts=None):
        if not tensors:
            return self._work(None, tensors)
        op = _op(opts.reduceOp if opts is not None else ReduceOp.SUM,
                 tensors[0].dtype)
        flat = torch.cat([_flat(t).view(-1) for t in tensors])
        req = self._issue(self._comm.iallreduce, flat, op=op)
        return self._work(req, tensors, _split_into(flat, tensors))

    @_staged()
    def broadcast(self, tensors, opts=None):
        t = self._one(tensors, "broadcast")
        return self._elementwise(self._comm.ibroadcast, tensors, t,
                                 root=opts.rootRank)

    @_staged()
    def reduce(self, tensors, opts=None):
        t = self._one(tensors, "reduce")
        return self._elementwise(self._comm.ireduce, tensors, t,
                                 op=_op(opts.reduceOp, t.dtype),
                                 root=opts.rootRank)

    @_staged(outputs=0)
    def allgather(self, output_tensors, input_tensors, opts=None):
        t = self._one(input_tensors, "allgather")
        outs = self._one(output_tensors, "allgather")
        if len(outs) != self.size():
            raise ValueError("mccl: all_gather: %d output tensors for %d "
                             "ranks" % (len(outs), self.size()))
        for o in outs:
            if o.dtype != t.dtype:
                raise ValueError("mccl: all_gather: every output tensor "
                                 "must be %s, as the input" % t.dtype)
        counts = [o.numel() for o in outs]
        if counts[self.rank()] != t.numel():
            raise ValueError("mccl: all_gather: this rank's output tensor "
                             "has %d elements, its input %d" % (
                                 counts[self.rank()], t.numel()))
        flat = torch.empty(sum(counts), dtype=t.dtype, device="cpu")
        if len(set(counts)) == 1:
            req = self._issue(self._comm.iallgather, _flat(t).view(-1),
                              out=flat)
        else:			# uneven, as torch allows: allgatherv
            req = self._issue(self._comm.iallgatherv, _flat(t).view(-1),
                              counts, flat)
        return self._work(req, output_tensors, _split_into(flat, outs))

    @_staged(outputs=0, reads_host=True)
    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """Every input of every rank, as bytes in one allgather."""
        ins = [_flat(t).view(-1).view(torch.uint8) for t in input_list]
        mine = torch.cat(ins) if ins else torch.empty(
            0, dtype=torch.uint8, device="cpu")
        flat = torch.empty(mine.numel() * self.size(), dtype=torch.uint8,
                           device="cpu")
        if len(output_lists) != self.size() or any(
                len(o) != len(input_list) for o in output_lists):
            raise ValueError("mccl: all_gather_coalesced: output lists must "
                             "be %d lists of %d tensors" % (
                                 self.size(), len(input_list)))
        req = self._issue(self._comm.iallgather, mine, out=flat)

        def unpack():
            at = 0
            for outs in output_lists:
                for o, i in zip(outs, ins):
                    part = flat[at:at + i.numel()]
                    o.copy_(part.view(o.dtype).view_as(o))
                    at += i.numel()
        return self._work(req, output_lists, unpack)

    @_staged(outputs=0)
    def _allgather_base(self, output, input, opts=None):
        if output.numel() != input.numel() * self.size():
            raise ValueError("mccl: all_gather_into_tensor: the output has "
                             "%d elements, %d x %d needed" % (
                                 output.numel(), self.size(),
                                 input.numel()))
        w = _flat(output)
        req = self._issue(self._comm.iallgather, _flat(input),
                          out=w.view(-1))
        return self._work(req, [output], self._back([(w, output)]))

    @_staged(outputs=0)
    def gather(self, output_tensors, input_tensors, opts):
        t = self._one(input_tensors, "gather")
        root = opts.rootRank
        if self.rank() != root:
            req = self._issue(self._comm.igather, _flat(t).view(-1),
                              root=root)
            return self._work(req, output_tensors)
        outs = self._one(output_tensors, "gather")
        if len(outs) != self.size() or any(
                o.numel() != t.numel() or o.dtype != t.dtype for o in outs):
            raise ValueError("mccl: gather: the root needs %d output "
                             "tensors like the input (%d %s)" % (
                                 self.size(), t.numel(), t.dtype))
        flat = torch.empty(t.numel() * self.size(), dtype=t.dtype,
                           device="cpu")
        req = self._issue(self._comm.igather, _flat(t).view(-1), out=flat,
                          root=root)
        return self._work(req, output_tensors, _split_into(flat, outs))

    @_staged(outputs=0, reads_host=True)
    def scatter(self, output_tensors, input_tensors, opts):
        o = self._one(output_tensors, "scatter")
        root = opts.rootRank
        w = _flat(o)
        flat = None
        if self.rank() == root:
            ins = self._one(input_tensors, "scatter")
            if len(ins) != self.size() or any(
                    i.numel() != o.numel() or i.dtype != o.dtype
                    for i in ins):
                raise ValueError("mccl: scatter: the root needs %d input "
                                 "tensors like the output (%d %s)" % (
                                     self.size(), o.numel(), o.dtype))
            flat = torch.cat([_flat(i).view(-1) for i in ins])
        req = self._issue(self._comm.iscatter, flat, w.view(-1), root=root)
        return self._work(req, output_tensors, self._back([(w, o)]))

    @_staged(outputs=0, reads_host=True)
    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        o = self._one(output_tensors, "reduce_scatter")
        ins = self._one(input_tensors, "reduce_scatter")
        if len(ins) != self.size():
            raise ValueError("mccl: reduce_scatter: %d input tensors for %d "
                             "ranks" % (len(ins), self.size()))
        for i in ins:
            if i.numel() != o.numel() or i.dtype != o.dtype:
                raise ValueError("mccl: reduce_scatter: every input tensor "
                                 "must match the output (%d %s), not %d %s"
                                 % (o.numel(), o.dtype, i.numel(), i.dtype))
        flat = torch.cat([_flat(i).view(-1) for i in ins])
        w = _flat(o)
        req = self._issue(self._comm.ireduce_scatter, flat, out=w.view(-1),
                                         op=_op(opts.reduceOp, o.dtype))
        return self._work(req, output_tensors, self._back([(w, o)]))

    @_staged(outputs=0)
    def _reduce_scatter_base(self, output, input, opts=None):
        if input.numel() != output.numel() * self.size() or \
                input.dtype != output.dtype:
            raise ValueError("mccl: reduce_scatter_tensor: the input has %d "
                             "%s, %d x %d %s needed" % (
                                 input.numel(), input.dtype, self.size(),
                                 output.numel(), output.dtype))
        w = _flat(output)
        req = self._issue(self._comm.ireduce_scatter, _flat(input).view(-1),
                                         out=w.view(-1),
                                         op=_op(opts.reduceOp,
                                                output.dtype))
        return self._work(req, [output], self._back([(w, output)]))

    @_staged(outputs=0, reads_host=True)
    def alltoall(self, output_tensors, input_tensors, opts=None):
        n = self.size()
        if len(output_tensors) != n or len(input_tensors) != n:
            raise ValueError("mccl: all_to_all: %d output and %d input "
                             "tensors for %d ranks" % (
                                 len(output_tensors), len(input_tensors), n))
        dtypes = {t.dtype for t in list(output_tensors) + list(input_tensors)}
        if len(dtypes) != 1:
            raise ValueError("mccl: all_to_all: the tensors must share one "
                             "dtype, not %s" % sorted(map(str, dtypes)))
        flat = torch.cat([_flat(t).view(-1) for t in input_tensors])
        sizes = {t.numel() for t in list(output_tensors) + list(input_tensors)}
        if len(sizes) == 1:
            req = self._issue(self._comm.ialltoall, flat)
            return self._work(req, output_tensors,
                              _split_into(flat, output_tensors))
        out = torch.empty(sum(o.numel() for o in output_tensors),
                          dtype=flat.dtype, device="cpu")
        req = self._issue(self._comm.ialltoallv, flat,
                          [t.numel() for t in input_tensors],
                                    out, [o.numel() for o in output_tensors])
        return self._work(req, output_tensors,
                          _split_into(out, output_tensors))

    @_staged(outputs=0)
    def alltoall_base(self, output, input, output_split_sizes,
                      input_split_sizes, opts=None):
        n = self.size()
        if not output_split_sizes and not input_split_sizes:
            if input.numel() % n or output.numel() != input.numel():
                raise ValueError("mccl: all_to_all_single: %d input and %d "
                                 "output elements do not split evenly over "
                                 "%d ranks" % (input.numel(), output.numel(),
                                               n))
            w = _flat(output)
            req = self._issue(self._comm.ialltoall, _flat(input).view(-1),
                                       out=w.view(-1))
            return self._work(req, [output], self._back([(w, output)]))
        # splits count rows of dim 0: alltoallv counts elements
        row_in = input[0].numel() if input.dim() and input.shape[0] else 1
        row_out = output[0].numel() if output.dim() and output.shape[0] \
            else 1
        sc = [s * row_in for s in (list(input_split_sizes) or
                                   [input.shape[0] // n] * n)]
        rc = [s * row_out for s in (list(output_split_sizes) or
                                    [output.shape[0] // n] * n)]
        w = _flat(output)
        req = self._issue(self._comm.ialltoallv, _flat(input).view(-1), sc,
                          w.view(-1), rc)
        return self._work(req, [output], self._back([(w, output)]))

    def barrier(self, opts=None):
        return self._work(self._issue(self._comm.ibarrier), [])

    # -- point to point --

    @_staged(inplace=False)
    def send(self, tensors, dstRank, tag):
        t = _flat(self._one(tensors, "send"))
        return self._work(self._issue(self._comm.isend, t, dstRank, tag=tag),
                          tensors)

    @_staged(outputs=0)
    def recv(self, tensors, srcRank, tag):
        t = self._one(tensors, "recv")
        w = _flat(t)
        req = self._issue(self._comm.irecv, w, srcRank, tag=tag)
        return self._work(req, tensors, self._back([(w, t)]))

    @_staged(outputs=0)
    def recv_anysource(self, tensors, tag):
        t = self._one(tensors, "recv")
        w = _flat(t)
        req = self._issue(self._comm.irecv, w, mccl.ANY_SOURCE, tag=tag)
        return self._work(req, tensors, self._back([(w, t)]), source=req)


def _split_into(flat, outs):
    """A closure copying consecutive parts of flat into each of outs."""
    def copy_out():
        at = 0
        for o in outs:
            o.copy_(flat[at:at + o.numel()].view_as(o))
            at += o.numel()
    return copy_out


def abort(group=None):
    """End every pending operation of group's job (default: the world) on
    every rank, with mccl.AbortedError: what a rank that gives up calls so
    that the others raise at once instead of waiting for their deadline."""
    pg = _mccl_group(group)
    if isinstance(pg, ProcessGroupMCCL):
        pg._comm.abort()
    else:
        pg.abort()


# The launcher's rank and size variables, as mccl_comm_init_env reads them.
_RANK_VARS = ("MCCL_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK")
_SIZE_VARS = ("MCCL_NRANKS", "WORLD_SIZE", "SLURM_NTASKS",
              "OMPI_COMM_WORLD_SIZE")
_launcher_job_taken = False


def _env_first(names):
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return None


def _is_launchers_world(rank, size):
    """The first group of a process whose rank and size are the launcher's:
    it is the launcher's job (mcclrun --job, MCCL_JOB, torchrun's run id
    or master's address...), so that mcclctl job NAME finds it, and the
    world mccl.init() gives the same script: one job, not two."""
    return not _launcher_job_taken and mccl._launched() and \
        _env_first(_RANK_VARS) == str(rank) and \
        _env_first(_SIZE_VARS) == str(size)


def _join(store, rank, size, timeout):
    """This group's MCCL job.  A group of one is a world of one, which
    needs no daemon (mccl.init); the launcher's world is the launcher's job;
    any other is named by the group's rank 0 in its store."""
    global _launcher_job_taken
    if size == 1:
        return mccl.Comm(None, "alone")
    if _is_launchers_world(rank, size):
        _launcher_job_taken = True
        return mccl.init()	# the same world mccl.init() gives the script
    key = "mccl_job"
    if rank == 0:
        store.set(key, _group_job())
    job = store.get(key).decode()
    return mccl.Comm.create(job, rank, size)


_groups_made = itertools.count(1)


def _group_job():
    """A new group's job name, chosen by its rank 0: under the launcher's
    job NAME, NAME.gR.K (R: this process's rank in the world, K: the
    groups it named so far), so that mcclctl jobs shows it beside its
    world; else torch-<uuid>.  Unique either way."""
    world = mccl.init.__globals__.get("_world")
    if not _launcher_job_taken or world is None or world._destroyed:
        return "torch-" + uuid.uuid4().hex
    rank = dist.get_rank() if dist.is_initialized() else world.rank
    return "%s.g%d.%d" % (world.job, rank, next(_groups_made))


def _mccl_group(group):
    """The mccl backend of group (None: the default group)."""
    pg = group if group is not None else \
        dist.distributed_c10d._get_default_group()
    ours = (ProcessGroupMCCL,) + ((_native.ProcessGroupMCCL,) if _native
                                  else ())
    if not isinstance(pg, ours) and hasattr(pg, "_get_backend"):
        try:
            pg = pg._get_backend(torch.device("cpu"))
        except RuntimeError:
            pass
    if not isinstance(pg, ours):
        raise ValueError("mccl.torch: %r is not a group of backend mccl" %
                         (pg,))
    return pg


def set_wire_dtype(wire, group=None):
    """What group's float32 sums and averages (all_reduce, reduce,
    reduce_scatter) send between nodes: "bf16" or "fp16" (half the bytes, summed in float32 on every
    node), or "fp32" (as they are); torch.bfloat16 and torch.float16 too.
    Every rank of the group must set the same, before the same operation."""
    pg = _mccl_group(group)
    if isinstance(pg, ProcessGroupMCCL):
        pg._in_order()
        pg._comm.set_wire_dtype(wire)
    else:
        pg._drain()
        handle = ctypes.c_void_p(pg._comm_handle)
        mccl._check(_lib.load().mccl_comm_set_wire_dtype(
            handle, mccl.wire_code(wire)), handle)


def _shutdown(submitter, completer, comm, staging):
    submitter.stop()
    submitter.join(timeout=5)
    completer.queue.put(None)
    completer.join(timeout=5)
    for s in staging:
        s.close()
    comm.destroy(force=True)


def _load_native():
    """mccl._native, the backend in C++, where it was built for this torch
    (make builds it beside this file); None where not, or where
    MCCL_TORCH_NATIVE=0 asks for the Python one."""
    if os.environ.get("MCCL_TORCH_NATIVE", "1") == "0":
        return None
    try:
        _lib.load()	# its libmccl: the module links none of its own
    except ImportError:
        return None	# no library: groups of one need none
    try:
        from mccl import _native as native
    except ModuleNotFoundError:
        if os.environ.get("MCCL_TORCH_NATIVE") == "1":
            raise ImportError("mccl.torch: MCCL_TORCH_NATIVE=1 but the "
                              "native backend was not built (make)")
        return None
    except ImportError as e:	# built, but does not load: say so
        if os.environ.get("MCCL_TORCH_NATIVE") == "1":
            raise ImportError("mccl.torch: MCCL_TORCH_NATIVE=1 but the "
                              "native backend does not load: %s" % e)
        sys.stderr.write("mccl.torch: the native backend does not load "
                         "(%s): the Python one is used\n" % e)
        return None
    if native.TORCH_VERSION != torch.__version__:
        sys.stderr.write("mccl.torch: the native backend was built for "
                         "torch %s, this is %s: the Python one is used "
                         "(rebuild: make)\n" % (native.TORCH_VERSION,
                                                  torch.__version__))
        return None
    return native


_native = _load_native()


def _create(store, rank, size, timeout):
    """The group's backend: the native one where it loaded (a group of
    one, which needs no daemon, stays with the Python one)."""
    if _native is None or size == 1:
        return ProcessGroupMCCL(store, rank, size, timeout)
    comm = _join(store, rank, size, timeout)
    shared = comm is mccl.init.__globals__.get("_world")
    handle = comm._handle.value if shared else comm._release()
    # torch's default timeout (30 min) leaves MCCL's (op_timeout_ms)
    timeout_s = timeout.total_seconds() if timeout and \
        timeout != _TORCH_DEFAULT_TIMEOUT else 0.0
    pg = _native.ProcessGroupMCCL(handle, not shared, rank, size,
                                  timeout_s, BACKEND_NAME)
    _comms[handle] = comm if shared else mccl.Comm._borrow(handle, comm.job)
    return pg


# A native group's communicator as a mccl.Comm (pg._comm, as the Python
# group has): the world's itself, else one borrowing the group's handle.
_comms = {}


def _comm_of(pg):
    """pg's communicator as a mccl.Comm; a group torch split from another
    (split_group) was made in C++: its Comm is made here, once."""
    handle = pg._comm_handle
    comm = _comms.get(handle)
    if comm is None:
        comm = mccl.Comm._borrow(handle, "")
        comm.job = comm.stats()["name"]
        _comms[handle] = comm
    return comm


if _native is not None:
    _native.ProcessGroupMCCL._comm = property(_comm_of)


# The name init_process_group takes: "mccl" where it is free; where another
# plugin holds it (Meta's torchcomms registers an "mccl" of its own),
# "mccld", said once on stderr; MCCL_TORCH_BACKEND chooses one outright.
BACKEND_NAME = None
_ALIAS = "mccld"


def _holder(name):
    """Who registered name: None (free), "us" or "another"."""
    plugin = dist.Backend._plugins.get(name.upper())
    if plugin is None and not hasattr(dist.Backend, name.upper()):
        return None
    fn = getattr(plugin, "creator_fn", None)
    return "us" if getattr(fn, "__module__", None) == __name__ else "another"


def _choose_name():
    asked = os.environ.get("MCCL_TORCH_BACKEND")
    if asked:
        if _holder(asked) == "another":
            raise RuntimeError("mccl.torch: MCCL_TORCH_BACKEND=%s: another "
                               "backend holds that name; choose another"
                               % asked)
        return asked
    if _holder("mccl") != "another":
        return "mccl"
    if _holder(_ALIAS) == "another":
        raise RuntimeError("mccl.torch: other plugins hold both \"mccl\" "
                           "and \"%s\": set MCCL_TORCH_BACKEND to a name "
                           "for MCCL's backend" % _ALIAS)
    sys.stderr.write("mccl.torch: another plugin holds the backend name "
                     "\"mccl\"; MCCL's is \"%s\": "
                     "init_process_group(\"%s\") (or set "
                     "MCCL_TORCH_BACKEND)\n" % (_ALIAS, _ALIAS))
    return _ALIAS


def _register():
    """The backend, for CPU and CUDA tensors (torch 2 also wants the
    devices), under BACKEND_NAME; imported twice: registered once."""
    global BACKEND_NAME
    BACKEND_NAME = _choose_name()
    if _holder(BACKEND_NAME) == "us":
        return
    kw = {}
    if "devices" in inspect.signature(
            dist.Backend.register_backend).parameters:
        kw["devices"] = ["cpu", "cuda"]
    dist.Backend.register_backend(BACKEND_NAME, _create, **kw)


_register()
