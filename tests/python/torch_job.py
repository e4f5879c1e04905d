"""torch_job.py: under a launcher, the torch world is the launcher's MCCL
job (mcclrun --job NAME here), and the same world mccl.init() gives the
script: one job, not two; other groups are jobs of their own, named
NAME.gR.K.  Prints one
"ok"/"FAIL" line per check of this rank."""
import sys

import numpy
import torch
import torch.distributed as dist
import mccl
import mccl.torch

want = sys.argv[1]
dist.init_process_group("mccl")
world = mccl.init()
pg = mccl.torch._mccl_group(None)
r, n = dist.get_rank(), dist.get_world_size()


def check(what, cond, detail=""):
    print("%s %s%s" % ("ok  " if cond else "FAIL", what,
                       ": %s" % (detail,) if not cond else ""))


# the Python group holds the Comm, the native one its handle
shared = pg._comm is world if hasattr(pg, "_comm") else \
    pg._comm_handle == world._handle.value
check("the torch world is mccl.init()'s world", shared)
name = world.stats()["name"]
check("its job is the launcher's (%s)" % want, name == want, name)
t = torch.ones(3) * (r + 1)
dist.all_reduce(t)
x = numpy.full(3, 1.0)
world.allreduce(x)
check("torch and mccl on the one job", t.tolist() == [n * (n + 1) / 2] * 3
      and x.tolist() == [float(n)] * 3, (t.tolist(), x.tolist()))
sub = dist.new_group(list(range(n)))
u = torch.ones(2)
dist.all_reduce(u, group=sub)
subname = mccl.torch._mccl_group(sub)._comm.stats()["name"]
check("another group is a job of its own, named after the launcher's "
      "(by its rank 0, global rank 0: the first group it named)",
      u.tolist() == [float(n)] * 2 and subname == want + ".g0.1", subname)
dist.destroy_process_group()
