"""ddp_train.py BACKEND OUT [DEVICE]: train a small MLP with
DistributedDataParallel on DEVICE (cpu, the default, or cuda: every rank
on GPU 0, which they may share) and save each rank's parameters to
OUT.RANK.pt (run under torchrun by tests/python/run.sh, once with "mccl"
and once with "gloo").

What DDP must get right, all exercised: the parameter broadcast at
construction (each rank starts from its own random init), gradient
bucketing (buckets of 50 kB: several per step), no_sync (every other
step accumulates two micro-batches, the first without communication),
and an uneven last batch (22 samples a rank in batches of 8).
"""

import sys

import torch
import torch.distributed as dist

import mccl.torch  # noqa: F401 (registers the backend)


def main():
    backend, out = sys.argv[1], sys.argv[2]
    device = torch.device(sys.argv[3] if len(sys.argv) > 3 else "cpu")
    dist.init_process_group(backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(100 + rank)	# DDP must make them rank 0's
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10)).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model,
                                                    bucket_cap_mb=0.05)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1234)
    x_all = torch.randn(22 * size, 64, generator=gen)
    y_all = torch.randint(0, 10, (22 * size,), generator=gen)
    x, y = x_all[rank::size].to(device), y_all[rank::size].to(device)
    loss_fn = torch.nn.CrossEntropyLoss()
    for epoch in range(2):
        for step, lo in enumerate(range(0, len(x), 8)):
            xb, yb = x[lo:lo + 8], y[lo:lo + 8]
            opt.zero_grad()
            if step % 2 == 1:		# accumulate without syncing first
                half = max(1, len(xb) // 2)
                with ddp.no_sync():
                    loss_fn(ddp(xb[:half]), yb[:half]).backward()
                xb, yb = xb[half:], yb[half:]
            loss_fn(ddp(xb), yb).backward()
            opt.step()
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()},
               "%s.%d.pt" % (out, rank))
    print("rank %d: trained, %d parameters" % (
        rank, sum(p.numel() for p in model.parameters())))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
