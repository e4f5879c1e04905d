"""torch_check.py: torch.distributed on backend "mccl", as one rank (run
under torchrun or mcclrun by tests/python/run.sh).  Each collective of
torch.distributed, its async form, non-contiguous tensors, new_group,
send/recv and the refusals, each checked against a reference.  Prints
"ok NAME" or "FAIL NAME: why"; exits 1 if any failed.
"""

import datetime
import gc
import sys
import time
import warnings

import torch
import torch.distributed as dist

import mccl
import mccl.torch  # noqa: F401 (registers the backend)
import checklib
from checklib import check, raises

dist.init_process_group("mccl")
R, N = dist.get_rank(), dist.get_world_size()
RO = dist.ReduceOp

check("backend", dist.get_backend() == "mccl", dist.get_backend())
S = float(N * (N + 1) // 2)		# the sum of rank + 1 over the ranks

# all_reduce: every ReduceOp the dtype allows
for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16,
              torch.int32, torch.int64, torch.int8, torch.uint8):
    cases = [(RO.SUM, S), (RO.PRODUCT, float(torch.arange(1, N + 1).prod())),
             (RO.MIN, 1.0), (RO.MAX, float(N))]
    if dtype.is_floating_point:
        cases.append((RO.AVG, S / N))
    for op, want in cases:
        t = torch.full((7,), R + 1, dtype=dtype)
        dist.all_reduce(t, op=op)
        check("all_reduce %s %s" % (dtype, op),
              bool((t.double() == want).all()), t)
# bitwise reductions on integers; refused on floats, named
for dtype in (torch.int32, torch.int64, torch.int8, torch.uint8):
    for op, fold in ((RO.BAND, lambda a, b: a & b),
                     (RO.BOR, lambda a, b: a | b),
                     (RO.BXOR, lambda a, b: a ^ b)):
        want = 3
        for k in range(1, N):
            want = fold(want, 3 + k)
        t = torch.full((5,), 3 + R, dtype=dtype)
        dist.all_reduce(t, op=op)
        check("all_reduce %s %s" % (dtype, op), bool((t == want).all()), t)
raises("all_reduce BXOR on float32 is refused, named", ValueError,
       lambda: dist.all_reduce(torch.ones(2), op=RO.BXOR),
       "ReduceOp.BXOR needs an integer tensor")
if hasattr(dist, "_make_nccl_premul_sum"):	# torch's only way to make one
    raises("all_reduce PREMUL_SUM is refused, named", ValueError,
           lambda: dist.all_reduce(torch.ones(2),
                                   op=dist._make_nccl_premul_sum(2.0)),
           "ReduceOp.PREMUL_SUM is not supported")
raises("all_reduce AVG on integers is refused", ValueError,
       lambda: dist.all_reduce(torch.ones(2, dtype=torch.int64),
                               op=RO.AVG), "floating-point")

# async_op: Work.wait, is_completed, get_future
t = torch.full((1000,), float(R))
w = dist.all_reduce(t, async_op=True)
check("async all_reduce: wait()", w.wait() is True)
check("async all_reduce: is_completed() after wait", w.is_completed())
fut = dist.all_reduce(torch.ones(3), async_op=True).get_future()
check("async all_reduce: get_future().wait() gives the tensors",
      bool((fut.wait()[0] == N).all()))
check("async all_reduce: the result", bool((t == S - N).all()))

# broadcast, reduce
b = torch.arange(5.) * (R + 1)
dist.broadcast(b, src=N - 1)
check("broadcast from the last rank", bool((b == torch.arange(5.) * N).all()))
r = torch.full((4,), float(R + 1))
dist.reduce(r, dst=0, op=RO.MAX)
check("reduce MAX to rank 0", R != 0 or bool((r == N).all()), r)

# all_gather, all_gather_into_tensor
outs = [torch.zeros(2, 3) for _ in range(N)]
dist.all_gather(outs, torch.full((2, 3), float(R)))
check("all_gather into a list", all(bool((o == k).all())
                                    for k, o in enumerate(outs)))
o = torch.zeros(N * 3)
dist.all_gather_into_tensor(o, torch.full((3,), float(R)))
check("all_gather_into_tensor", bool((o == torch.arange(N).repeat_interleave(
    3).float()).all()), o)

# reduce_scatter, reduce_scatter_tensor
o = torch.zeros(3)
dist.reduce_scatter(o, [torch.full((3,), float(k + R)) for k in range(N)])
check("reduce_scatter of a list", bool((o == N * R + S - N).all()), o)
o = torch.zeros(2)
dist.reduce_scatter_tensor(o, torch.arange(N * 2.))
check("reduce_scatter_tensor", bool((o == N * torch.arange(
    R * 2., R * 2. + 2)).all()), o)
raises("reduce_scatter with an input larger than the output is refused",
       ValueError, lambda: dist.reduce_scatter(
           torch.zeros(3), [torch.ones(4) for _ in range(N)]),
       "must match the output")
raises("reduce_scatter_tensor with a short input is refused", ValueError,
       lambda: dist.reduce_scatter_tensor(torch.zeros(2),
                                          torch.ones(N * 2 - 1)),
       "needed")

# all_to_all, all_to_all_single: even and uneven
outs = [torch.zeros(2) for _ in range(N)]
dist.all_to_all(outs, [torch.full((2,), float(R * 10 + k)) for k in range(N)])
check("all_to_all", all(bool((o == k * 10 + R).all())
                        for k, o in enumerate(outs)))
o = torch.zeros(N)
dist.all_to_all_single(o, torch.arange(N).float() + 100 * R)
check("all_to_all_single, even", bool((o == torch.arange(N).float() * 100 +
                                       R).all()), o)
# rank r sends r + 1 elements to each rank
ins = torch.full(((R + 1) * N,), float(R))
o = torch.zeros(sum(k + 1 for k in range(N)))
dist.all_to_all_single(o, ins, output_split_sizes=[k + 1 for k in range(N)],
                       input_split_sizes=[R + 1] * N)
want = torch.cat([torch.full((k + 1,), float(k)) for k in range(N)])
check("all_to_all_single, uneven splits", torch.equal(o, want), o)

# gather, scatter and the object collectives built on them
root = N - 1
outs = [torch.zeros(3) for _ in range(N)] if R == root else None
dist.gather(torch.full((3,), float(R)), outs, dst=root)
check("gather to rank %d" % root, R != root or all(
    bool((o == k).all()) for k, o in enumerate(outs)))
o = torch.zeros(2, dtype=torch.int64)
dist.scatter(o, [torch.tensor([k, 10 * k]) for k in range(N)] if R == 0
             else None, src=0)
check("scatter from rank 0", o.tolist() == [R, 10 * R], o)
got = [None] * N if R == 0 else None
dist.gather_object({"rank": R, "pad": "x" * R}, got, dst=0)
check("gather_object", R != 0 or got == [{"rank": k, "pad": "x" * k}
                                         for k in range(N)], got)
got = [None]
dist.scatter_object_list(got, [("to", k) for k in range(N)] if R == 0
                         else None, src=0)
check("scatter_object_list", got == [("to", R)], got)
objs = [None] * N
dist.all_gather_object(objs, [R] * R)
check("all_gather_object", objs == [[k] * k for k in range(N)], objs)

# uneven all_gather and all_to_all, all_gather_coalesced
outs = [torch.zeros(k + 1) for k in range(N)]
dist.all_gather(outs, torch.full((R + 1,), float(R)))
check("all_gather with uneven sizes", all(
    o.numel() == k + 1 and bool((o == k).all()) for k, o in enumerate(outs)))
outs = [torch.zeros(k + 1) for k in range(N)]	# rank k sends k + 1 to all
dist.all_to_all(outs, [torch.full((R + 1,), float(R * 10 + d))
                       for d in range(N)])
check("all_to_all with uneven sizes", all(
    bool((o == k * 10 + R).all()) for k, o in enumerate(outs)), outs)
ins = [torch.full((2,), float(R)), torch.full((3,), float(R))]
outs = [[torch.zeros(2), torch.zeros(3)] for _ in range(N)]
with warnings.catch_warnings():		# torch says it will go away
    warnings.simplefilter("ignore")
    dist.all_gather_coalesced(outs, ins)
check("all_gather_coalesced", all(
    bool((a == k).all()) and bool((b == k).all())
    for k, (a, b) in enumerate(outs)))

# a sparse all_reduce sums every rank's entries
sp = torch.sparse_coo_tensor([[R, N], [0, 1]], [1.0, float(R)], (N + 1, 2))
dist.all_reduce(sp)
want = torch.zeros(N + 1, 2)
for k in range(N):
    want[k, 0] += 1
    want[N, 1] += k
check("all_reduce of a sparse tensor", torch.equal(sp.to_dense(), want),
      sp.to_dense())

# non-contiguous tensors: results copied back
nc = torch.zeros(4, 6).t()
nc += R + 1
dist.all_reduce(nc)
check("all_reduce of a non-contiguous tensor, copied back",
      not nc.is_contiguous() and bool((nc == S).all()))
nc = torch.zeros(3, 4)[:, 1]
dist.broadcast(nc if R else nc.fill_(7), src=0)
check("broadcast into a non-contiguous view", bool((nc == 7).all()), nc)

# barrier, send/recv, new_group
dist.barrier()
check("barrier", True)
if N > 1:
    if R == 0:
        dist.send(torch.arange(4.), dst=1, tag=3)
    elif R == 1:
        x = torch.zeros(4)
        dist.recv(x, src=0, tag=3)
        check("send/recv", torch.equal(x, torch.arange(4.)), x)
    evens = list(range(0, N, 2))
    g = dist.new_group(evens)
    if R in evens:
        t = torch.ones(2)
        dist.all_reduce(t, group=g)
        check("new_group of the even ranks", bool((t == len(evens)).all()),
              t)
        if hasattr(dist.ProcessGroup, "_set_group_name"):	# torch 2
            check("a group keeps the name torch gives it", g.group_name ==
                  dist.distributed_c10d._world.pg_names[g], g.group_name)
        late = dist.all_reduce(torch.ones(2), group=g, async_op=True)
        dist.destroy_process_group(g)	# torch 2 calls g.shutdown() ...
        g.shutdown()			# ... torch 1 does not; once is all
        raises("a destroyed group's operations: a clear error",
               mccl.InvalidArgumentError,
               lambda: g.allreduce([torch.ones(1)]).wait(), "destroyed")
        del g				# the group's last reference
        gc.collect()
        try:				# shutdown may have aborted it
            late.wait()
            outcome = "completed"
        except mccl.Error as e:
            outcome = "raised %s" % e.name
        check("a Work waited after its group is gone: a result or mccl's "
              "error, no crash", outcome.startswith(("completed", "raised")),
              outcome)
    req = dist.isend(torch.ones(2), (R + 1) % N)
    x = torch.zeros(2)
    dist.recv(x, (R - 1) % N)
    req.wait()
    check("isend/recv around the ring", bool((x == 1).all()))
if N > 1:		# recv without src: from any rank, which it returns
    if R == 0:
        srcs = set()
        for _ in range(N - 1):
            x = torch.zeros(1)
            src = dist.recv(x, tag=12)
            srcs.add((src, int(x.item())))
        check("recv from any source returns the sender",
              srcs == {(k, 100 + k) for k in range(1, N)}, srcs)
    else:
        dist.send(torch.tensor([100.0 + R]), dst=0, tag=12)
    dist.barrier()

# Operations that must wait (CUDA copies, large CPU tensors) go through the
# group's submitter thread; the calls after one keep their order.  Rank 0
# holds an allreduce back 0.3 s (a stand-in for a CUDA copy's event) and
# calls small ones after it, which would go at once: had they passed it,
# rank 0's job would meet 3 elements where the others send 5, and fail.
class _Later:
    """An event that ends `seconds` from now: synchronize() waits."""

    def __init__(self, seconds):
        self.at = time.monotonic() + seconds

    def synchronize(self):
        time.sleep(max(0.0, self.at - time.monotonic()))


pg = mccl.torch._mccl_group(None)
NATIVE = hasattr(pg, "_hold_starts")	# the C++ backend, else Python's


def held_allreduce(t, seconds):
    """all_reduce of t, async, started `seconds` from now (as after a
    CUDA copy), and whether the call returned before it started."""
    if NATIVE:
        pg._hold_starts(seconds)
        work = dist.all_reduce(t, async_op=True)
        return work, pg._queued_starts() >= 2
    held = pg._issue_after(_Later(seconds), pg._comm.iallreduce, (t,), {})
    return pg._work(held, [t]), isinstance(held, mccl.torch._Deferred) \
        and not held._ready.is_set() and pg._submitter.queued >= 1


a = torch.full((5,), R + 1.0)
b = torch.full((3,), 10.0 * (R + 1))
work_a, unstarted = held_allreduce(a, 0.3 if R == 0 else 0.0)
work_b = dist.all_reduce(b, async_op=True)
if R == 0:
    check("an operation held back returns at once, unsubmitted", unstarted)
work_b.wait()
work_a.wait()
check("calls after a held-back operation keep their order",
      bool((a == S).all()) and bool((b == 10 * S).all()), (a, b))
# Large CPU tensors are submitted by that thread too, between small ones
big = [torch.full((3 << 18,), float(R + k)) for k in range(3)]	# 3 MiB
small = [torch.full((4,), float(R * k)) for k in range(3)]
works = [dist.all_reduce(t, async_op=True) for pair in zip(big, small)
         for t in pair]
for w in works:
    w.wait()
check("large CPU all_reduces between small ones",
      all(bool((big[k] == S + N * (k - 1)).all()) and
          bool((small[k] == k * (N - 1) * N / 2).all()) for k in range(3)),
      [(x[0].item(), y[0].item()) for x, y in zip(big, small)])
# 32 MiB and more run in parts of 16 MiB, the last one longer: every part
# lands where it belongs, in place, in a non-contiguous tensor, async
count = (9 << 20) + 3			# 36 MiB + 12 bytes of float32
for op, want in ((RO.SUM, S), (RO.AVG, S / N), (RO.MAX, float(N))):
    t = torch.arange(count, dtype=torch.float32) % 5 + R + 1
    dist.all_reduce(t, op=op)
    ref = torch.arange(count, dtype=torch.float32) % 5
    ref = ref * (N if op != RO.MAX else 1) + (want if op != RO.AVG else 0)
    if op == RO.AVG:
        ref = torch.arange(count, dtype=torch.float32) % 5 + S / N
    check("all_reduce %s of %d float32 in parts"
          % (mccl.torch._op_name(op), count),
          torch.equal(t, ref), (t[:3], t[-3:], ref[-3:]))
t = torch.full((count,), float(R))
if R == N - 1:
    t[-1] = -5.0
dist.broadcast(t, src=N - 1)
check("broadcast of %d float32 in parts" % count,
      bool((t[:-1] == N - 1).all()) and t[-1].item() == -5.0, t[-2:])
t = torch.full((count,), R + 1.0)
dist.reduce(t, dst=N - 1)
check("reduce of %d float32 in parts" % count,
      R != N - 1 or bool((t == S).all()), t[-2:])
nc = torch.zeros(3, (count + 2) // 3 * 2)[:, ::2]	# non-contiguous
nc += R + 1
dist.all_reduce(nc)
check("all_reduce of a non-contiguous tensor in parts",
      not nc.is_contiguous() and bool((nc == S).all()), nc[-1, -2:])
ts = [torch.full((count,), R + 1.0) for _ in range(3)]
works = [dist.all_reduce(x, async_op=True) for x in ts]
for w in works:
    w.wait()
check("three all_reduces in parts in flight at once",
      all(bool((x == S).all()) for x in ts), [x[-1] for x in ts])
# set_wire_dtype applies from the next call on: an operation held back
# before it still crosses the wire it was called with (else the nodes'
# wires for it would differ, and the op fail naming both)
c = torch.full((1 << 18,), R + 1.0)
work_c, _ = held_allreduce(c, 0.3 if R == 0 else 0.0)
mccl.torch.set_wire_dtype("bf16")
d = torch.full((1 << 18,), R + 1.0)
dist.all_reduce(d)
mccl.torch.set_wire_dtype("fp32")
work_c.wait()
check("set_wire_dtype waits for the operations called before it",
      bool((c == S).all()) and bool((d == S).all()), (c[:2], d[:2]))
dist.barrier()

# torch 2's coalescing (DDP, FSDP, batch_isend_irecv): the operations in a
# _coalescing_manager as one Work; all_gather_into_tensor and
# reduce_scatter_tensor in one as one operation each (the "fast path")
native = not isinstance(mccl.torch._mccl_group(None),
                        mccl.torch.ProcessGroupMCCL)
if native and int(torch.__version__.split(".")[0]) >= 2:
    cpu = torch.device("cpu")
    ts = [torch.full((k,), R + 1.0) for k in (3, 1000, 5)]
    with dist._coalescing_manager(device=cpu, async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    check("_coalescing_manager: three all_reduces, one wait",
          all(bool((t == S).all()) for t in ts), [t[:2] for t in ts])
    ins = [torch.full((k,), float(R)) for k in (2, 3)]
    outs = [torch.full((k * N,), -1.0) for k in (2, 3)]
    with dist._coalescing_manager(device=cpu):
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    check("all_gather_into_tensor, coalesced", all(
        torch.equal(o, torch.arange(N).float().repeat_interleave(k))
        for o, k in zip(outs, (2, 3))), outs)
    ins = [torch.arange(k * N, dtype=torch.float32) + R for k in (2, 3)]
    outs = [torch.full((k,), -1.0) for k in (2, 3)]
    with dist._coalescing_manager(device=cpu):
        for o, i in zip(outs, ins):
            dist.reduce_scatter_tensor(o, i)
    check("reduce_scatter_tensor, coalesced", all(
        torch.equal(o, N * torch.arange(R * k, (R + 1) * k).float() +
                    N * (N - 1) / 2) for o, k in zip(outs, (2, 3))), outs)
    if N > 1:
        send, got = torch.full((4,), float(R)), torch.full((4,), -1.0)
        works = dist.batch_isend_irecv([
            dist.P2POp(dist.isend, send, (R + 1) % N),
            dist.P2POp(dist.irecv, got, (R - 1) % N)])
        for w in works:
            w.wait()
        check("batch_isend_irecv around the ring",
              bool((got == (R - 1) % N).all()), got)
    seq = getattr(mccl.torch._mccl_group(None),
                  "_get_sequence_number_for_group", None)
    if seq is not None:
        check("the group's sequence number counts its operations",
              seq() > 0, seq())
else:
    print("coalescing: needs torch 2 and the native backend")

# A group's timeout is its operations' deadline
if N > 1:
    g = dist.new_group(list(range(N)), timeout=datetime.timedelta(seconds=1))
    if R == 0:
        t0 = time.monotonic()
        raises("a group's timeout=: a receive that never comes times out",
               TimeoutError, lambda: dist.recv(torch.zeros(1), src=1,
                                               group=g, tag=77),
               "timeout waiting for a message from rank 1")
        check("... after the group's 1 s", 0.9 < time.monotonic() - t0 < 5,
              time.monotonic() - t0)
    dist.barrier()

# An error reaches Work.wait(): a receive of 3 elements meets a send of 2
# (the job fails: the last check, once every rank is done with the others).
dist.barrier()
if N > 1 and R < 2:
    if R == 0:
        try:		# the send may see the job fail, or not: a race
            dist.send(torch.ones(2), dst=1, tag=77)
        except mccl.Error:
            pass
    else:
        raises("an operation's error is raised by Work.wait()", Exception,
               lambda: dist.recv(torch.zeros(3), src=0, tag=77), "bytes")
# Every rank stays in the job until rank 1 has its error: one that left
# first would fail the job with "has left the job" instead.  The store is
# the launcher's, which outlives the failed job.
if N > 1:
    store = dist.distributed_c10d._get_default_store()
    if R == 1:
        store.set("torch_check.error_seen", "1")
    else:
        store.wait(["torch_check.error_seen"], datetime.timedelta(seconds=120))

print("rank %d: %d checks failed" % (R, checklib.failed))
dist.destroy_process_group()
sys.exit(1 if checklib.failed else 0)
