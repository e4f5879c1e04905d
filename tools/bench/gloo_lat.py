"""gloo_lat.py: latency of small torch.distributed (gloo) all_reduce calls,
the Gloo side of the harness's latency case, timed as lat.c times MCCL:
each of ITERS float32 sum all_reduces is timed, each iteration counts as
its slowest rank, and rank 0 prints median, p99, mean and minimum, and
where each rank ran ("# placement HOST...").
One process per rank: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and
GLOO_SOCKET_IFNAME) from the environment.
Usage: gloo_lat.py [BYTES [ITERS [WARMUP]]]   (default 8 1000 100)"""
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist


def percentile(v, p):
    """Nearest-rank percentile of a sorted list."""
    k = max(0, min(len(v) - 1, math.ceil(p / 100 * len(v)) - 1))
    return v[k]


def main():
    nbytes = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    rank = int(os.environ["RANK"])
    n = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=n)
    hosts = [None] * n
    dist.all_gather_object(hosts, socket.gethostname())
    if rank == 0:
        print(f"# ranks {n}\n# placement {' '.join(hosts)}", flush=True)
    src = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
    for _ in range(warmup):
        y = src.clone()
        dist.all_reduce(y)
    dist.barrier()
    t = torch.zeros(iters, dtype=torch.float64)
    for i in range(iters):
        y = src.clone()
        t0 = time.perf_counter()
        dist.all_reduce(y)
        t[i] = (time.perf_counter() - t0) * 1e6
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        v = sorted(t.tolist())
        print(f"lat system=gloo ranks={n} bytes={src.numel() * 4} "
              f"iters={iters} median_us={percentile(v, 50):.2f} "
              f"p99_us={percentile(v, 99):.2f} mean_us={sum(v) / iters:.2f} "
              f"min_us={v[0]:.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
