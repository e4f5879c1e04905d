"""cuda_check.py: torch.distributed on backend "mccl" with CUDA tensors, as
one rank (run under mcclrun by tests/python/run.sh; every rank on GPU 0,
which they may share).  Each collective on CUDA tensors against a
reference, the stream semantics (the copy out waits for the work queued
before it on the caller's stream; Work.wait() orders the caller's stream
after the copy back, without a device-wide sync), futures and their
callbacks, sizes past one staging buffer, sparse tensors; then mccl.Comm
(the package) on CUDA tensors and __cuda_array_interface__.  Without a CUDA
device it prints "skipped: no CUDA device" and exits 0.
"""

import inspect
import sys
import traceback

import torch
import torch.distributed as dist

import mccl
import mccl.torch  # noqa: F401 (registers the backend)
import checklib
from checklib import check, raises

if not torch.cuda.is_available():
    print("skipped: no CUDA device")
    sys.exit(0)

DEV = torch.device("cuda", 0)


def init_group():
    """init_process_group as a GPU user writes it: device_id names the
    rank's GPU (torch >= 2.3), which binds the group to it."""
    if "device_id" not in inspect.signature(
            dist.init_process_group).parameters:
        dist.init_process_group("mccl")
        print("device_id: not in this torch")
        return
    t = torch.ones(3, device=DEV)
    try:
        dist.init_process_group("mccl", device_id=DEV)
        dist.all_reduce(t)
    except Exception as e:			# noqa: BLE001 (reported)
        traceback.print_exc(file=sys.stdout)
        check("init_process_group(device_id=cuda:0), then all_reduce",
              False, "%s: %s" % (type(e).__name__, e))
        if not dist.is_initialized():
            dist.init_process_group("mccl")
        return
    check("init_process_group(device_id=cuda:0), then all_reduce",
          bool((t == dist.get_world_size()).all()), t)


init_group()
R, N = dist.get_rank(), dist.get_world_size()
RO = dist.ReduceOp
S = float(N * (N + 1) // 2)		# the sum of rank + 1 over the ranks


def full(shape, value, dtype=torch.float32):
    return torch.full(shape, value, dtype=dtype, device=DEV)


# all_reduce: dtypes, ops, sizes from one element to past 1 MiB
for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64):
    for count in (1, 1000, 3 << 20):
        t = full((count,), R + 1, dtype)
        dist.all_reduce(t)
        check("all_reduce SUM %s x %d on cuda" % (dtype, count),
              t.is_cuda and bool((t.double() == S).all()), t[:4])
for op, want in ((RO.MAX, float(N)), (RO.MIN, 1.0), (RO.AVG, S / N)):
    t = full((33,), R + 1)
    dist.all_reduce(t, op=op)
    check("all_reduce %s on cuda" % op, bool((t == want).all()), t[:4])

# non-contiguous: the result lands in the tensor's own strides
base = full((8, 6), R + 1)
col = base[:, 1]
dist.all_reduce(col)
check("all_reduce of a non-contiguous CUDA view",
      bool((base[:, 1] == S).all()) and bool((base[:, 0] == R + 1).all()),
      base)

# stream semantics: work queued before the call, on a side stream
side = torch.cuda.Stream(device=DEV)
with torch.cuda.stream(side):
    t = full((1 << 16,), 0.0)
    torch.cuda._sleep(50_000_000)		# ~25 ms of GPU time first
    t.add_(R + 1)
    work = dist.all_reduce(t, async_op=True)
    work.wait()				# orders side after the copy back
    doubled = t * 2			# queued on side, after the copy
    got = doubled.cpu()			# on side too: no other stream
check("the copy out waits for the caller's stream; wait() orders it after "
      "the copy back", bool((got == 2 * S).all()), got[:4])

# the caller does not wait for the GPU: all_reduce returns while the work
# queued before it still runs; a CPU all_reduce called after it, while
# only rank 0's GPU is busy, still comes after it in the job's order
t = full((1 << 16,), R + 1.0)
if R == 0:
    torch.cuda._sleep(200_000_000)		# ~100 ms of GPU time first
mark = torch.cuda.Event()
mark.record()
work = dist.all_reduce(t, async_op=True)
if R == 0:
    check("all_reduce returns before the GPU ran the work queued before "
          "it", not mark.query())
c = torch.full((3,), float(R + 1))
dist.all_reduce(c)
work.wait()
check("a CPU all_reduce after a CUDA one waiting for its copy: in order",
      bool((t == S).all()) and bool((c == S).all()), (t[:2], c))

# pipelined: 32 MiB and more go in parts of 16 MiB (the last one longer)
count = (9 << 20) + 3			# 36 MiB + 12 bytes of float32
for op, want in ((RO.SUM, S), (RO.AVG, S / N), (RO.MAX, float(N))):
    t = full((count,), R + 1.0)
    dist.all_reduce(t, op=op)
    check("all_reduce %s of %d float32 in parts" % (op, count),
          bool((t == want).all()), (t[:2], t[-2:]))
t = full((count,), float(R))
if R == N - 1:
    t[-1] = -5.0
dist.broadcast(t, src=N - 1)
check("broadcast of %d float32 in parts" % count,
      bool((t[:-1] == N - 1).all()) and t[-1].item() == -5.0, t[-2:])
t = full((count,), R + 1.0)
dist.reduce(t, dst=0)
check("reduce of %d float32 in parts" % count,
      R != 0 or bool((t == S).all()), t[-2:])
nc = torch.zeros(3, (count + 2) // 3 * 2, device=DEV)[:, ::2]
nc += R + 1				# non-contiguous: copied out whole
dist.all_reduce(nc)
check("all_reduce of a non-contiguous CUDA tensor in parts",
      not nc.is_contiguous() and bool((nc == S).all()), nc[-1, -2:])
ts = [full((count,), R + 1.0) for _ in range(3)]
works = [dist.all_reduce(x, async_op=True) for x in ts]
for w in works:
    w.wait()
check("three pipelined all_reduces in flight at once",
      all(bool((x == S).all()) for x in ts), [x[-1] for x in ts])

# futures: the value is the CUDA tensors; a callback sees the result
t = full((10,), R + 1)
fut = dist.all_reduce(t, async_op=True).get_future()
chained = fut.then(lambda f: f.value()[0] * 3)
value = chained.wait()
check("get_future().then on CUDA tensors", value.is_cuda and
      bool((value == 3 * S).all()), value)
check("the future's value is the CUDA tensor itself",
      fut.value()[0].data_ptr() == t.data_ptr())

# broadcast, reduce
t = full((5,), R + 7)
dist.broadcast(t, src=N - 1)
check("broadcast on cuda", bool((t == N - 1 + 7).all()), t)
t = full((5,), R + 1)
dist.reduce(t, dst=0)
check("reduce on cuda", R != 0 or bool((t == S).all()), t)

# all_gather: a list, into one tensor, a CPU output beside a CUDA input
outs = [full((3,), -1) for _ in range(N)]
dist.all_gather(outs, full((3,), R))
check("all_gather on cuda",
      all(bool((o == r).all()) and o.is_cuda for r, o in enumerate(outs)),
      outs)
out = full((N * 4,), -1)
dist.all_gather_into_tensor(out, full((4,), R))
check("all_gather_into_tensor on cuda", torch.equal(
    out.cpu(), torch.arange(N).repeat_interleave(4).float()), out)
cpu_outs = [torch.full((2,), -1.0) for _ in range(N)]
dist.all_gather(cpu_outs, full((2,), R))
check("all_gather of a CUDA tensor into CPU tensors",
      all(bool((o == r).all()) for r, o in enumerate(cpu_outs)), cpu_outs)

# reduce_scatter, all_to_all
out = full((3,), -1)
dist.reduce_scatter_tensor(out, full((N * 3,), R + 1))
check("reduce_scatter_tensor on cuda", bool((out == S).all()), out)
inp = torch.arange(N * 2, dtype=torch.float32, device=DEV) + 100 * R
out = full((N * 2,), -1)
dist.all_to_all_single(out, inp)
want = torch.tensor([100 * r + 2 * R + k for r in range(N) for k in (0, 1)],
                    dtype=torch.float32)
check("all_to_all_single on cuda", torch.equal(out.cpu(), want), out)

# gather, scatter
gl = [full((2,), -1) for _ in range(N)] if R == 0 else None
dist.gather(full((2,), R), gl, dst=0)
check("gather on cuda", R != 0 or all(bool((g == r).all())
                                      for r, g in enumerate(gl)), gl)
out = full((2,), -1)
dist.scatter(out, [full((2,), r * 10) for r in range(N)] if R == 0
             else None, src=0)
check("scatter on cuda", bool((out == R * 10).all()), out)

# send/recv between pairs
if N % 2 == 0:
    peer = R ^ 1
    t = full((4,), R)
    if R % 2 == 0:
        dist.send(t, peer)
        dist.recv(t, peer)
    else:
        got = full((4,), -1)
        dist.recv(got, peer)
        dist.send(got + 1, peer)
        t = got
    want = R + 1 if R % 2 == 0 else peer
    check("send/recv on cuda", bool((t == want).all()), t)

# a sparse CUDA tensor: summed as on the CPU (gloo's way), on the GPU after
sp = (torch.eye(3, device=DEV) * (R + 1)).to_sparse()
dist.all_reduce(sp)
check("all_reduce of a sparse CUDA tensor", sp.is_cuda and sp.is_sparse and
      torch.equal(sp.to_dense().cpu(), torch.eye(3) * S), sp)

# refusals, named
if torch.cuda.device_count() > 1:
    raises("tensors on two GPUs in one operation are refused, named",
           ValueError, lambda: dist.all_gather(
               [full((1,), 0) for _ in range(N)],
               torch.ones(1, device="cuda:1")), "in one operation")

# The host buffers of operations in flight at once are kept and found
# again: rounds of as many make none (DDP's buckets, all of one size).
# The native backend's buffers are the daemon's segments, page-locked.
pg = mccl.torch._mccl_group(None)
if hasattr(pg, "_staging_stats"):
    def made():
        return pg._staging_stats()["made"]
    check("CUDA tensors stage in the daemon's segments, page-locked",
          pg._staging_stats()["fallback"] == "", pg._staging_stats())
else:
    pools = pg._staging

    def made():
        return pools[0].made
before = made()
for _ in range(4):
    ts = [full((600000,), R + 1) for _ in range(6)]	# 2.4 MB each
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    for w in works:
        w.wait()
    torch.cuda.synchronize()
check("4 rounds of 6 all_reduces in flight make at most 6 host buffers "
      "of their size", all(bool((x == S).all()) for x in ts) and
      made() - before <= 6, (before, made()))

# torch 2: coalescing on CUDA tensors, sub-groups by split (split_group,
# and DeviceMesh, which splits where the world is bound to a device)
if hasattr(pg, "_staging_stats") and hasattr(dist, "split_group"):
    ts = [full((k,), R + 1) for k in (5, 70000)]
    with dist._coalescing_manager(device=DEV, async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    check("_coalescing_manager on CUDA tensors",
          all(bool((t == S).all()) for t in ts), [t[:2] for t in ts])
    outs = [full((k * N,), -1) for k in (2, 3)]
    with dist._coalescing_manager(device=DEV):
        for o, k in zip(outs, (2, 3)):
            dist.all_gather_into_tensor(o, full((k,), R))
    check("all_gather_into_tensor coalesced, on CUDA tensors", all(
        torch.equal(o.cpu(), torch.arange(N).float().repeat_interleave(k))
        for o, k in zip(outs, (2, 3))), outs)
    evens = list(range(0, N, 2))
    odds = list(range(1, N, 2))
    sub = dist.split_group(split_ranks=[evens, odds] if odds else [evens])
    mine = evens if R % 2 == 0 else odds
    t = full((4,), R + 1)
    dist.all_reduce(t, group=sub)
    check("split_group: the even and the odd ranks' groups",
          sub.size() == len(mine) and bool((t == sum(
              r + 1 for r in mine)).all()), (sub.size(), t))
    if N % 2 == 0:
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cuda", (2, N // 2),
                                mesh_dim_names=("dp", "tp"))
        t = full((3,), R + 1)
        dist.all_reduce(t, group=mesh.get_group("tp"))
        row = [r for r in range(N) if r // (N // 2) == R // (N // 2)]
        check("init_device_mesh (2, %d): all_reduce over tp" % (N // 2),
              bool((t == sum(r + 1 for r in row)).all()), t)
else:
    print("coalescing and split_group: need torch 2 and the native backend")

# the package itself: mccl.Comm on CUDA tensors and on any object with
# __cuda_array_interface__, blocking and not
world = mccl.init()
t = full((1000,), world.rank + 1)
check("mccl.Comm.allreduce of a CUDA tensor, in place",
      world.allreduce(t) is t and bool((t == S).all()), t[:4])
t = full((6,), world.rank + 1)
req = world.iallreduce(t, op=mccl.MAX)
check("mccl.Comm.iallreduce of a CUDA tensor: wait() copies back",
      req.wait() is t and bool((t == N).all()), t)
g = world.allgather(full((3,), world.rank))
check("mccl.Comm.allgather: a new output on the device",
      g.is_cuda and tuple(g.shape) == (N, 3) and torch.equal(
          g.cpu(), torch.arange(N).float().repeat_interleave(3).view(N, 3)),
      g)


class Interface:
    """Another library's GPU array: only __cuda_array_interface__."""

    def __init__(self, t):
        self.t = t
        self.__cuda_array_interface__ = t.__cuda_array_interface__


t = full((5,), world.rank + 1)
world.allreduce(Interface(t))
check("mccl.Comm on an object with __cuda_array_interface__",
      bool((t == S).all()), t)

dist.barrier()
dist.destroy_process_group()
sys.exit(1 if checklib.failed else 0)
