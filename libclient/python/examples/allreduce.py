"""The README's example: every rank adds its number; run it alone
(python3 allreduce.py) or as 4 ranks (mcclrun -n 4 python3 allreduce.py)."""
import numpy

import mccl

world = mccl.init()                     # a world of 1 without a launcher
x = mccl.empty(1024, "float32")         # shared with the daemon: no copy
x[:] = world.rank + 1
world.allreduce(x)                      # in place, summed over the ranks
want = world.size * (world.size + 1) / 2
print("rank %d of %d: %g (expected %g)" % (world.rank, world.size, x[0], want))
assert numpy.all(x == want)
