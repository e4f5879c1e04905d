"""Data-parallel training with DistributedDataParallel on backend "mccl":
    torchrun --nproc_per_node 2 ddp.py         (or mcclrun -n 2 python3 ddp.py)
"""
import torch
import torch.distributed as dist

import mccl.torch  # noqa: F401 (registers the backend)

dist.init_process_group("mccl")
rank, size = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 1))
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
torch.manual_seed(1 + rank)
for step in range(20):
    x = torch.randn(16, 32)
    loss = (ddp(x) - x.sum(1, keepdim=True)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("rank %d: loss %.4f after 20 steps" % (rank, loss.item()))
dist.destroy_process_group()
