"""dist_check.py: the Python package against real daemons, as one rank of
a job (run by tests/python/run.sh under mcclrun).  Every collective, every
dtype and op, in place and out of place, numpy, torch and plain buffers,
mccl.empty, the non-blocking forms, split, point to point, and the errors:
each result checked against a reference this rank computes from every
rank's (deterministic) input.  Prints "ok NAME" or "FAIL NAME: why" per
check; exits 1 if any failed.
"""

import array
import hashlib
import sys
import time

import numpy
import torch

import mccl
import checklib
from checklib import check, raises

world = mccl.init()
R, N = world.rank, world.size

def values(rank, count, op):
    """Rank rank's input: small integers, exact in every dtype, and products
    of N of them fit int8."""
    base = numpy.arange(count) + rank
    return (base % 2 + 1) if op == mccl.PROD else (base % 5 + rank + 1)


def reference(count, op):
    ins = numpy.array([values(k, count, op) for k in range(N)],
                      dtype=numpy.float64)
    if op >= mccl.BAND:
        bits = ins.astype(numpy.int64)
        fold = {mccl.BAND: numpy.bitwise_and, mccl.BOR: numpy.bitwise_or,
                mccl.BXOR: numpy.bitwise_xor}[op]
        return fold.reduce(bits, axis=0).astype(numpy.float64)
    return {mccl.SUM: ins.sum(0), mccl.PROD: ins.prod(0),
            mccl.MIN: ins.min(0), mccl.MAX: ins.max(0),
            mccl.AVG: ins.sum(0) / N}[op]


NP_DTYPES = {"int8": "int8", "uint8": "uint8", "int32": "int32",
             "uint32": "uint32", "int64": "int64", "uint64": "uint64",
             "float16": "float16", "float32": "float32",
             "float64": "float64"}
FLOATS = ("float16", "bfloat16", "float32", "float64")


def make(dtype, data, kind):
    if dtype == "bfloat16" or kind == "torch":
        return torch.tensor(numpy.asarray(data, dtype=numpy.float64),
                            dtype=getattr(torch, dtype))
    return numpy.asarray(data, dtype=NP_DTYPES[dtype])


def as64(buf):
    if isinstance(buf, torch.Tensor):
        return buf.to(torch.float64).numpy()
    return numpy.asarray(buf, dtype=numpy.float64)


# ---- allreduce: every dtype x op, in place and out of place ----
COUNT = 37
for dtype in mccl._buffers.DTYPE_NAMES:
    for op, opname in enumerate(mccl.OP_NAMES):
        if op == mccl.AVG and dtype not in FLOATS:
            raises("allreduce avg on %s is refused" % dtype,
                   mccl.UnsupportedError, lambda: world.allreduce(
                       make(dtype, values(R, COUNT, op), "numpy"),
                       op=op), "floating-point")
            continue
        if op >= mccl.BAND and dtype in FLOATS:
            raises("allreduce %s on %s is refused" % (opname, dtype),
                   mccl.UnsupportedError, lambda: world.allreduce(
                       make(dtype, values(R, COUNT, op), "torch" if
                            dtype == "bfloat16" else "numpy"), op=op),
                   "integer dtype")
            continue
        want = reference(COUNT, op)
        # torch 1.13 has no uint32 or uint64; numpy no bfloat16 (make()
        # gives a tensor then).
        for kind in ("numpy", "torch") if hasattr(torch, dtype) and \
                dtype != "bfloat16" else ("numpy",):
            x = make(dtype, values(R, COUNT, op), kind)
            world.allreduce(x, op=op)
            y = make(dtype, values(R, COUNT, op), kind)
            out = make(dtype, numpy.zeros(COUNT), kind)
            got = world.allreduce(y, out=out, op=op)
            check("allreduce %s %s %s" % (dtype, opname, kind),
                  numpy.array_equal(as64(x), want) and got is out and
                  numpy.array_equal(as64(out), want) and
                  numpy.array_equal(as64(y), values(R, COUNT, op)),
                  "in place %s, out %s, want %s" % (as64(x)[:4],
                                                    as64(out)[:4], want[:4]))

# ---- the other collectives, on float32 and int64 ----
for dtype in ("float32", "int64"):
    b = make(dtype, numpy.arange(8) * (R + 1) if R == 1 else
             numpy.zeros(8), "numpy")
    world.broadcast(b, root=1 % N)
    check("broadcast %s from rank %d" % (dtype, 1 % N),
          numpy.array_equal(as64(b), numpy.arange(8) * (1 % N + 1)))
    mine = make(dtype, numpy.full(3, R + 1), "numpy")
    g = world.allgather(mine)
    check("allgather %s: shape (size, 3)" % dtype,
          g.shape == (N, 3) and numpy.array_equal(
              as64(g), numpy.repeat(numpy.arange(1, N + 1), 3).reshape(N, 3)))
    src = make(dtype, numpy.arange(N * 4) + R, "numpy")
    rs = world.reduce_scatter(src)
    want = sum(numpy.arange(N * 4) + k for k in range(N))[R * 4:(R + 1) * 4]
    check("reduce_scatter %s" % dtype, numpy.array_equal(as64(rs), want),
          "%s != %s" % (as64(rs), want))
    red = make(dtype, numpy.full(5, R + 1), "numpy")
    out = make(dtype, numpy.zeros(5), "numpy")
    world.reduce(red, out=out, root=0)
    check("reduce %s to rank 0" % dtype, R != 0 or numpy.array_equal(
        as64(out), numpy.full(5, N * (N + 1) / 2)))
    a2a = make(dtype, [R * 100 + j for j in range(N)], "numpy")
    world.alltoall(a2a)
    check("alltoall %s in place" % dtype, numpy.array_equal(
        as64(a2a), [k * 100 + R for k in range(N)]), as64(a2a))

# ---- gather, scatter, the v-collectives, pickled objects ----
root = N - 1
g = world.gather(numpy.full(3, R + 1, dtype=numpy.int64), root=root)
check("gather to rank %d" % root, (g is None) if R != root else (
    g.shape == (N, 3) and numpy.array_equal(g, numpy.repeat(
        numpy.arange(1, N + 1), 3).reshape(N, 3))), g)
t = world.gather(torch.full((2,), float(R)), root=0)
check("gather of tensors: shape (size, 2) on rank 0", R != 0 or (
    tuple(t.shape) == (N, 2) and bool((t[:, 0] == torch.arange(N)).all())))
out = numpy.zeros(2, dtype=numpy.float32)
world.scatter(numpy.arange(2 * N, dtype=numpy.float32) if R == root else
              None, out, root=root)
check("scatter from rank %d" % root, list(out) == [2 * R, 2 * R + 1], out)
raises("scatter with a short buf on the root is a ValueError", ValueError,
       lambda: world.scatter(numpy.zeros(1, dtype=numpy.float32),
                             numpy.zeros(2, dtype=numpy.float32), root=R),
       "needed")
counts = [(r % 3) for r in range(N)]		# some ranks send nothing
v = world.allgatherv(numpy.full(counts[R], R, dtype=numpy.int32), counts)
check("allgatherv, uneven (0, 1, 2, ...)", list(v) == [r for r in range(N)
                                                       for _ in range(counts[r])], v)
o = numpy.full(sum(counts) + N, -1, dtype=numpy.int32)
displs = [sum(counts[:r]) + r for r in range(N)]	# a gap after each
world.allgatherv(numpy.full(counts[R], R, dtype=numpy.int32), counts, o,
                 displs)
check("allgatherv into out with displs", all(
    list(o[displs[r]:displs[r] + counts[r]]) == [r] * counts[r]
    for r in range(N)), o)
raises("allgatherv: buf's length must be counts[rank]", ValueError,
       lambda: world.allgatherv(numpy.zeros(counts[R] + 1), counts),
       "counts[%d]" % R)
sc = [(R + d) % 3 for d in range(N)]		# rank R sends (R+d)%3 to d
rc = [(s + R) % 3 for s in range(N)]
send = numpy.concatenate([numpy.full(sc[d], R * 10 + d, dtype=numpy.int64)
                          for d in range(N)])
o = numpy.zeros(sum(rc), dtype=numpy.int64)
world.alltoallv(send, sc, o, rc)
want = [s * 10 + R for s in range(N) for _ in range(rc[s])]
check("alltoallv, uneven", list(o) == want, "%s != %s" % (o, want))
check("bcast_obj", world.bcast_obj({"from": 0, "n": N} if R == 0 else None)
      == {"from": 0, "n": N})
check("allgather_obj", world.allgather_obj(("rank", R, "x" * R)) ==
      [("rank", r, "x" * r) for r in range(N)])
got = world.gather_obj([R] * R, root=root)
check("gather_obj", got is None if R != root else got == [[r] * r for r
                                                          in range(N)], got)
check("scatter_obj", world.scatter_obj([{"to": k} for k in range(N)] if
                                       R == 0 else None) == {"to": R})

world.barrier()
check("barrier", True)

# ---- containers: bytearray, memoryview, array.array, bytes ----
ba = bytearray([R + 1] * 16)
world.allreduce(ba)
check("allreduce of a bytearray (uint8)", ba == bytearray(
    [N * (N + 1) // 2] * 16))
arr = array.array("d", [R + 1.0] * 4)
world.allreduce(memoryview(arr), op=mccl.MAX)
check("allreduce of array.array through a memoryview", list(arr) == [N] * 4)
g = world.allgather(b"%c" % (65 + R))
check("allgather of bytes (read-only input)", bytes(g) == bytes(
    range(65, 65 + N)))
bf = numpy.zeros(4, dtype=numpy.uint16)	# bfloat16 bits: 1.0 is 0x3f80
bf[:] = 0x3f80
world.allreduce(bf, dtype="bfloat16")
check("bfloat16 in a uint16 array (dtype=\"bfloat16\")",
      numpy.all(bf == torch.tensor([float(N)], dtype=torch.bfloat16).view(
          torch.int16).item() & 0xffff), bf)

# ---- mccl.empty: memory shared with the daemon ----
e = mccl.empty((4, 8), "float64")
e[:] = R
world.allreduce(e, op=mccl.MAX)
check("mccl.empty numpy (4, 8) float64", e.shape == (4, 8) and
      numpy.all(e == N - 1))
eb = mccl.empty(16, torch.bfloat16)
eb.fill_(1)
world.allreduce(eb)
check("mccl.empty torch bfloat16", isinstance(eb, torch.Tensor) and
      eb.dtype == torch.bfloat16 and bool((eb == N).all()))
raises("destroy() refuses while mccl.empty buffers live",
       mccl.InvalidArgumentError, world.destroy, "still alive")
del e, eb

# ---- non-blocking forms ----
reqs = [world.iallreduce(numpy.full(64, float(R + k), dtype=numpy.float32))
        for k in range(20)]
got = [r.wait() for r in reqs]
check("20 iallreduce in flight, each waited",
      all(numpy.all(g == sum(range(N)) + N * k) for k, g in enumerate(got)))
r = world.iallgather(numpy.array([R], dtype=numpy.int32))
while not r.test():
    pass
check("iallgather polled with test()", r.done and list(r.wait().ravel()) ==
      list(range(N)))

# ---- point to point, and a receive that times out ----
nxt, prv = (R + 1) % N, (R - 1) % N
s = world.isend(numpy.full(6, R, dtype=numpy.int64), nxt, tag=5)
got = world.recv(numpy.zeros(6, dtype=numpy.int64), prv, tag=5)
s.wait()
check("send/recv around the ring", numpy.all(got == prv))
if R == 0:
    late = world.irecv(numpy.zeros(2, dtype=numpy.float32), 1 % N, tag=9)
    e = raises("a wait that times out is a TimeoutError (also builtins')",
               TimeoutError, lambda: late.wait(timeout=0.2), "not complete")
    check("... and an mccl.TimeoutError, the request still pending",
          isinstance(e, mccl.TimeoutError) and not late.done)
world.barrier()
if R == 1 % N and N > 1:
    world.send(numpy.ones(2, dtype=numpy.float32), 0, tag=9)
if R == 0 and N > 1:
    check("the late receive completes after its timeout", numpy.all(
        late.wait() == 1))

# ---- argument errors: before anything is sent ----
nc = numpy.zeros((4, 4), dtype=numpy.float32)[:, 1]
raises("a non-contiguous array is a ValueError", ValueError,
       lambda: world.allreduce(nc), "not contiguous")
raises("a non-contiguous tensor is a ValueError", ValueError,
       lambda: world.allreduce(torch.zeros(4, 4).t()), "not contiguous")
raises("a complex array is a TypeError", TypeError,
       lambda: world.allreduce(numpy.zeros(2, dtype=numpy.complex64)),
       "complex64")
raises("a non-buffer is a TypeError", TypeError,
       lambda: world.allreduce([1, 2, 3]), "not a buffer")
raises("an output of another size is a ValueError", ValueError,
       lambda: world.allreduce(numpy.zeros(4), out=numpy.zeros(5)),
       "holds 5 elements, 4 needed")
raises("an output of another dtype is a TypeError", TypeError,
       lambda: world.allreduce(numpy.zeros(4), out=numpy.zeros(4, "f4")),
       "float32")
raises("a read-only output is a ValueError", ValueError,
       lambda: world.broadcast(b"abcd"), "read-only")
raises("root out of range is a ValueError", ValueError,
       lambda: world.broadcast(numpy.zeros(2), root=N),
       "root %d is out of range for %d ranks" % (N, N))
raises("an unknown op is a ValueError", ValueError,
       lambda: world.allreduce(numpy.zeros(2), op=9), "op 9")
raises("a send with a negative tag is a ValueError", ValueError,
       lambda: world.send(numpy.zeros(2), 0, tag=-3), "tag -3")
x = numpy.full(3, 1.0)
world.allreduce(x)
check("the communicator works after the refused calls", numpy.all(x == N))

# ---- split, and an error from the daemon on a sub-communicator ----
sub = world.split(R % 2, key=-R)
check("split: ranks of one color, ordered by key",
      sub.size == len(range(R % 2, N, 2)) and
      sub.rank == sub.size - 1 - R // 2)
cnt = 4 if R == 0 else 6
e = raises("mismatched counts: every rank gets InvalidArgumentError",
           mccl.InvalidArgumentError,
           lambda: world.split(0).allreduce(numpy.zeros(cnt)), "count")
check("... which is an mccl.Error and a ValueError, with its code",
      isinstance(e, mccl.Error) and isinstance(e, ValueError) and
      e.code == 1 and e.message in str(e))
x = numpy.full(3, 2.0)
world.allreduce(x)
check("the world is untouched by the sub-job's failure", numpy.all(
    x == 2 * N))

# ---- the daemons' counters for this job ----
world.barrier()
m = mccl.get_metrics()
mine = [rk for node in m["nodes"] for rk in node["ranks"] if rk["rank"] == R]
check("get_metrics: this job, every node, this rank's collectives counted",
      m["name"] == world.job and m["nranks"] == N and len(mine) == 1 and
      mine[0]["completed"] > 10 and m["state"] == "ready", m)

# ---- a 16-bit wire for float32 sums ----
NODES = len(m["nodes"])
BIG = 300001				# past ALGO_SMALL_BYTES: the ring runs
ins = numpy.array([numpy.random.default_rng(1000 + k).uniform(
    -1, 1, BIG).astype(numpy.float32) for k in range(N)])
exact = ins.astype(numpy.float64).sum(0)
abs_sum = numpy.abs(ins.astype(numpy.float64)).sum(0)
for wire, u in (("bf16", 2.0 ** -8), ("fp16", 2.0 ** -11)):
    wc = world.split(0)		# its own job, counting from 0
    wc.set_wire_dtype(wire)
    got = wc.allreduce(ins[R].copy())
    err = numpy.abs(got.astype(numpy.float64) - exact)
    bound = (NODES + 1) * u * abs_sum + (NODES + 1) * 2.0 ** -24
    check("%s wire: every element within (nodes + 1) u sum|x| of the "
          "exact sum" % wire, bool((err <= bound).all()),
          float((err - bound).max()))
    check("%s wire: rounded, not float32's result" % wire,
          float((err / numpy.maximum(abs_sum, 1e-30)).max()) > 2.0 ** -20)
    digest = int.from_bytes(hashlib.sha256(got.tobytes()).digest()[:7],
                            "little")
    same = wc.allgather(numpy.array([digest], dtype=numpy.int64))
    check("%s wire: the same bits on every rank" % wire,
          len(set(same.ravel().tolist())) == 1, same)
    st = wc.stats()
    here = [n for n in st["nodes"] if n.get("wire_ops", 0) > 0]
    check("%s wire: every node counts the op and the bytes it did not send"
          % wire, len(here) == NODES and all(
              n["wire_bytes_saved"] >= BIG * 2 * (NODES - 1) // NODES
              for n in here) if NODES > 1 else True, st["nodes"])
    rs_ins = numpy.array([numpy.random.default_rng(2000 + k).uniform(
        -1, 1, (BIG // N + 1) * N).astype(numpy.float32) for k in range(N)])
    mine = slice(R * (BIG // N + 1), (R + 1) * (BIG // N + 1))
    rs = wc.reduce_scatter(rs_ins[R].copy())
    rs_err = numpy.abs(rs - rs_ins.astype(numpy.float64).sum(0)[mine])
    rs_bound = ((NODES + 1) * u * numpy.abs(rs_ins.astype(numpy.float64))
                .sum(0)[mine] + (NODES + 1) * 2.0 ** -24)
    check("%s wire: reduce_scatter within the bound" % wire,
          bool((rs_err <= rs_bound).all()), float((rs_err - rs_bound).max()))
    red = wc.reduce(ins[R].copy(), root=0)
    if R == 0:
        check("%s wire: reduce within the bound on the root" % wire,
              bool((numpy.abs(red.astype(numpy.float64) - exact) <=
                    bound).all()))
    wc.barrier()
    ops = [n.get("wire_ops", 0) for n in wc.stats()["nodes"]]
    check("%s wire: the reduce_scatter and the reduce crossed on it too"
          % wire, all(k == 3 for k in ops) if NODES > 1 else True, ops)
    ints = wc.allreduce(numpy.full(BIG, R + 1, dtype=numpy.int32))
    check("%s wire: an int32 sum is untouched" % wire,
          bool((ints == N * (N + 1) // 2).all()))
    # Gradient-sized values (about 1e-5: float16's subnormal range, where
    # its spacing is 2^-24): within the documented bound, whose absolute
    # term is (nodes + 1) 2^-25 for float16, 2^-134 for bfloat16.
    small = ins * numpy.float32(2e-5)
    got = wc.allreduce(small[R].copy())
    s_exact = small.astype(numpy.float64).sum(0)
    s_abs = numpy.abs(small.astype(numpy.float64)).sum(0)
    tiny = 2.0 ** -25 if wire == "fp16" else 2.0 ** -134
    s_err = numpy.abs(got.astype(numpy.float64) - s_exact)
    s_bound = (NODES + 1) * (u * s_abs + tiny)
    check("%s wire: gradient-sized values within (nodes + 1) (u sum|x| + "
          "%g)" % (wire, tiny), bool((s_err <= s_bound).all()),
          float((s_err - s_bound).max()))
    wc.destroy()
raises("set_wire_dtype('int8'): a ValueError naming the choices", ValueError,
       lambda: world.set_wire_dtype("int8"), "expected fp32, bf16 or fp16")
mixed = world.split(0)
mixed.set_wire_dtype("bf16" if R == 0 else "fp32")
mixed.set_timeout(20)
raises("ranks that disagree on the wire: a 1 KiB op fails too, naming it",
       mccl.Error, lambda: mixed.allreduce(ins[R][:256].copy()), "wire")
mixed.destroy(force=True)
mixed = world.split(0)
mixed.set_wire_dtype("bf16" if R == 0 else "fp32")
mixed.set_timeout(20)
raises("ranks that disagree on the wire: the op fails, naming it",
       mccl.Error, lambda: mixed.allreduce(ins[R].copy()), "wire")
mixed.destroy(force=True)

# ---- receives from any source; a deadline set on a communicator ----
if R == 0:
    got = {}
    for _ in range(N - 1):
        rq = world.irecv(numpy.zeros(1, dtype=numpy.int32), mccl.ANY_SOURCE)
        v = rq.wait()
        got[rq.source] = (rq.tag, int(v[0]))
    check("receives from any source: each sender once, its tag and data",
          got == {s: (200 + s, s * 10) for s in range(1, N)}, got)
else:
    world.send(numpy.array([R * 10], dtype=numpy.int32), 0, tag=200 + R)
last = world.split(0)		# its failure must not end the world's job
last.set_timeout(0.5)
if R == 0:
    t0 = time.monotonic()
    raises("set_timeout(0.5): a receive that never comes times out",
           mccl.TimeoutError, lambda: last.recv(
               numpy.zeros(1, dtype=numpy.int32), mccl.ANY_SOURCE, tag=9),
           "timeout waiting for a message from any rank")
    check("... after 0.5 s", 0.45 < time.monotonic() - t0 < 3,
          time.monotonic() - t0)
world.barrier()

print("rank %d: %d checks failed" % (R, checklib.failed))
sys.exit(1 if checklib.failed else 0)
