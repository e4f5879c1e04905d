"""torch_alone.py: the torch backend in a group of one needs no daemon
and no C library, as mccl.init() does not: every collective leaves the
tensor as it is, async works, DDP trains, the group ends cleanly.  Run
with MCCL_LIBRARY and MCCL_SOCKET pointing nowhere; prints "ok N"."""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import mccl.torch  # noqa: F401  (registers "mccl")

store_file = tempfile.mktemp(prefix="mccl-alone-")
dist.init_process_group("mccl", store=dist.FileStore(store_file, 1), rank=0,
                        world_size=1)
checks = 0


def check(what, cond):
    global checks
    if not cond:
        sys.exit("FAIL %s" % what)
    checks += 1


t = torch.arange(6, dtype=torch.float32)
dist.all_reduce(t)
check("all_reduce of one rank", t.tolist() == list(range(6)))
dist.all_reduce(t, op=dist.ReduceOp.MAX)
check("MAX of one rank", t.tolist() == list(range(6)))
dist.broadcast(t, 0)
out = [torch.zeros(6)]
dist.all_gather(out, t)
check("all_gather of one rank", out[0].tolist() == list(range(6)))
w = dist.all_reduce(t, async_op=True)
w.wait()
check("async all_reduce", t.tolist() == list(range(6)))
dist.barrier()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(6, 2))
model(torch.ones(3, 6)).sum().backward()
check("DDP backward", model.module.weight.grad is not None)
dist.destroy_process_group()
if os.path.exists(store_file):  # FileStore removes it itself on exit
    os.unlink(store_file)
print("ok %d" % checks)
