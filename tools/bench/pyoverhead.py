"""pyoverhead.py: what the Python package adds to a C call of libmccl.

Run as one rank of a 1-rank job (MCCL_JOB, MCCL_RANK=0, MCCL_NRANKS=1 and
MCCL_SOCKET set, as tools/bench/pyoverhead.sh does).  Alternates, in
rounds, three loops of small in-place allreduces on the same buffer:
  C      mccl-perf's own loop is not in this process; instead the raw
         ctypes call with every argument prepared (what any binding must
         pay) is the floor, and a no-op ctypes call (mccl_comm_rank) says
         what crossing into C costs;
  numpy  world.allreduce(array), the whole Python path;
  torch  world.allreduce(tensor), likewise.
Prints per-op medians over the rounds and the overhead over the C call
two ways:
  by difference: (Python path - raw call) + one crossing into C.  The
      daemon's round trip (tens of us) is in both terms, and so is the way
      a longer gap between calls changes it (a daemon thread that slept
      wakes slower): an upper bound that moves with the machine's load;
  by parts: the same Python path on a world of one (every check, no C
      call) + one crossing into C: what the package itself costs.
"""

import ctypes
import statistics
import sys
import time

import numpy

import mccl
from mccl import _lib


def per_op(fn, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    world = mccl.init()
    lib = _lib.load()
    x = numpy.zeros(2, dtype=numpy.float32)
    ptr = x.__array_interface__["data"][0]
    handle = world._handle
    loops = {
        "raw ctypes allreduce": lambda: lib.mccl_allreduce(
            ptr, ptr, 2, mccl.float32, mccl.SUM, handle, None),
        "mccl.allreduce(numpy)": lambda: world.allreduce(x),
        "no-op ctypes call": lambda: lib.mccl_comm_rank(handle),
    }
    try:
        import torch
        t = torch.zeros(2)
        loops["mccl.allreduce(torch)"] = lambda: world.allreduce(t)
    except ImportError:
        pass
    alone = mccl.Comm(None, "alone")
    loops["python path alone (numpy)"] = lambda: alone.allreduce(x)
    if "mccl.allreduce(torch)" in loops:
        loops["python path alone (torch)"] = lambda: alone.allreduce(t)
    times = {k: [] for k in loops}
    for _ in range(rounds):
        for k, fn in loops.items():
            per_op(fn, n // 10)		# warm
            times[k].append(per_op(fn, n))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print("%-24s %8.2f us/op (min %.2f)" % (k, v, min(times[k])))
    crossing = med["no-op ctypes call"]
    for kind in ("numpy", "torch"):
        k = "mccl.allreduce(%s)" % kind
        if k in med:
            print("overhead over the C call, %s: %.2f us by parts, %.2f us "
                  "by difference" % (
                      kind, med["python path alone (%s)" % kind] + crossing,
                      med[k] - med["raw ctypes allreduce"] + crossing))


if __name__ == "__main__":
    main()
