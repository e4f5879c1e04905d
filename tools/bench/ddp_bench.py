"""ddp_bench.py BACKEND [GLOBAL_BATCH [STEPS [WARMUP]]]: DDP training
throughput, in samples per second, of a fixed MLP of 25.2 M parameters
(1024 -> 4096 -> 4096 -> 1024 -> 16) on random data, one torch thread a
rank.  BACKEND "none" trains in this one process alone (no DDP); "mccl"
or "gloo" run as one rank of a torch.distributed job (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT as torchrun sets them), each rank taking its
share of the global batch.  BENCH_DEVICE=cuda trains on GPU 0 (every
rank; they may share it).  BENCH_NO_SYNC=1 trains every step under DDP's
no_sync(): the same work without any gradient communication, the bound
that communication hidden behind backward would reach.  BENCH_HOOK=bf16
registers torch's bf16_compress_hook (gradients cast to bfloat16 on the
client, summed in bfloat16), against MCCL_WIRE_DTYPE=bf16.  Rank 0 prints
one line,
    ddp backend=B ranks=N batch=G params=P steps=S samples_per_s=X
for tools/bench/report.py.
"""

import contextlib
import os
import sys
import time

import torch


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
        torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
        torch.nn.Linear(4096, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 16))


def main():
    backend = sys.argv[1]
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    rank, size = 0, 1
    device = torch.device(os.environ.get("BENCH_DEVICE", "cpu"))
    net = model().to(device)
    if backend != "none":
        import torch.distributed as dist
        import mccl.torch  # noqa: F401 (registers "mccl")
        dist.init_process_group(backend)
        rank, size = dist.get_rank(), dist.get_world_size()
        net = torch.nn.parallel.DistributedDataParallel(net)
        if os.environ.get("BENCH_HOOK") == "bf16":
            from torch.distributed.algorithms.ddp_comm_hooks import \
                default_hooks
            net.register_comm_hook(None, default_hooks.bf16_compress_hook)
    if batch % size:
        raise SystemExit("ddp_bench: global batch %d over %d ranks" %
                         (batch, size))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1 + rank)
    x = torch.randn(batch // size, 1024, generator=gen).to(device)
    y = torch.randint(0, 16, (batch // size,), generator=gen).to(device)
    loss_fn = torch.nn.CrossEntropyLoss()
    quiet = os.environ.get("BENCH_NO_SYNC") == "1" and backend != "none"
    for step in range(warmup + steps):
        if step == warmup:
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        opt.zero_grad()
        with net.no_sync() if quiet else contextlib.nullcontext():
            loss_fn(net(x), y).backward()
        opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    if rank == 0:
        params = sum(p.numel() for p in net.parameters())
        print("ddp backend=%s ranks=%d batch=%d params=%d steps=%d "
              "samples_per_s=%.2f" % (backend, size, batch, params, steps,
                                      batch * steps / elapsed))
        sys.stdout.flush()
    if backend != "none":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
