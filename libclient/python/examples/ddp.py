"""Data-parallel training with DistributedDataParallel on backend "mccl":
    torchrun --nproc_per_node 2 ddp.py [cpu|cuda]
    mcclrun -n 2 python3 ddp.py [cpu|cuda]
The device defaults to the GPU where torch sees one; ranks that outnumber
the GPUs share them.  Each rank prints its loss before and after, and a
sum of the model's weights, which DDP keeps the same on every rank.
"""
import os
import sys

import torch
import torch.distributed as dist

import mccl.torch  # noqa: F401 (registers the backend)

kind = sys.argv[1] if len(sys.argv) > 1 else (
    "cuda" if torch.cuda.is_available() else "cpu")
if kind == "cuda":
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    dev = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
else:
    dev = torch.device(kind)

dist.init_process_group("mccl")
rank, size = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 1)).to(dev)
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
torch.manual_seed(1 + rank)
for step in range(20):
    x = torch.randn(16, 32, device=dev)
    loss = (ddp(x) - x.sum(1, keepdim=True)).pow(2).mean()
    if step == 0:
        first = loss.item()
    opt.zero_grad()
    loss.backward()
    opt.step()
weights = sum(p.double().sum().item() for p in model.parameters())
print("rank %d of %d on %s: loss %.4f, then %.4f after 20 steps; weights' "
      "sum %.9f" % (rank, size, dev, first, loss.item(), weights))
dist.destroy_process_group()
