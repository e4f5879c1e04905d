"""gloo_allreduce.py: torch.distributed (gloo) all_reduce bandwidth, the
Gloo side of the harness's bandwidth cases, in the table mccl-perf and
nccl-tests print: for each size from MINB to MAXB (doubling), ITERS float32
sum all_reduces of one tensor, in place, timed as one span whose slowest
rank counts, after the same loop once untimed (the warm-up); then one more
from fresh inputs, every element of its result checked.  As in nccl-tests
and mccl-perf, nothing but the all_reduces is timed (the tensor's values
grow from one to the next), so that no copy of a fresh tensor weighs on
either backend.  From 8 MiB the first warm-up is 5 of them, and the timed loop
as many as fill about SPAN_S by that warm-up's pace (5 to ITERS), after a
second warm-up of as many where that is more than 5 (a backend makes what
as many operations in flight need before the clock): a stall of one op
weighs less in a longer span.  Rank 0 also prints
where each rank ran ("# placement HOST..."), for the harness to check.

With RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set it is one rank of a
job launched elsewhere; without, it starts NRANKS local ranks itself (on
127.0.0.1) and waits for them.  BENCH_BACKEND (gloo, or mccl) and
BENCH_DEVICE (cpu; cuda: every rank on GPU 0; cuda-per-rank: GPU RANK,
as NCCL needs; the time including the copies, synchronized) measure another backend or CUDA tensors the same
way.
Usage: gloo_allreduce.py NRANKS MINB MAXB ITERS"""
import math
import os
import socket
import subprocess
import sys
import time

import torch
import torch.distributed as dist


def bench_device():
    """BENCH_DEVICE's: cpu, cuda (GPU 0), or cuda-per-rank (GPU RANK, as
    NCCL wants: one GPU per rank)."""
    name = os.environ.get("BENCH_DEVICE", "cpu")
    if name == "cuda-per-rank":
        rank = int(os.environ.get("RANK", "0"))
        return torch.device("cuda", rank % max(torch.cuda.device_count(), 1))
    return torch.device("cuda", 0) if name == "cuda" else torch.device(name)


DEVICE = bench_device()
SPAN_S = 0.5		# seconds a large size's timed loop aims for


def values(rank, count):
    """Rank r's elements: small integers, so every sum is exact."""
    return ((torch.arange(count) % 7 + 1).float() * (rank + 1)).to(DEVICE)


def sync():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def time_allreduce(y, iters):
    """Seconds per all_reduce of y, the slowest rank's."""
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(y)
    sync()
    took = torch.tensor([(time.perf_counter() - t0) / iters],
                        dtype=torch.float64, device=DEVICE)  # nccl: on GPU
    dist.all_reduce(took, op=dist.ReduceOp.MAX)
    return took.item()


def wrong_elements(x, n):
    """One all_reduce of a copy of x, checked: the elements it got wrong."""
    y = x.clone()
    dist.all_reduce(y)
    sync()
    return int((y != values(0, y.numel()) * (n * (n + 1) // 2)).sum())


def print_placement(rank, n):
    hosts = [None] * n
    dist.all_gather_object(hosts, socket.gethostname())
    if rank == 0:
        print(f"# ranks {n}\n# placement {' '.join(hosts)}", flush=True)


def run_rank(minb, maxb, iters):
    rank = int(os.environ["RANK"])
    n = int(os.environ["WORLD_SIZE"])
    backend = os.environ.get("BENCH_BACKEND", "gloo")
    if backend == "mccl":
        import mccl.torch  # noqa: F401 (registers the backend)
    if DEVICE.type == "cuda":
        torch.cuda.set_device(DEVICE)
    dist.init_process_group(backend, rank=rank, world_size=n)
    print_placement(rank, n)
    if rank == 0:
        print(f"#{'size':>11} {'count':>10} {'time(us)':>10} {'algbw':>8} "
              f"{'busbw':>8} {'wrong':>6}", flush=True)
    b = minb
    while b <= maxb:
        count = b // 4
        x = values(rank, count)
        y = x.clone()
        n_it = min(iters, 5) if b >= 8 << 20 else iters
        # warm-up: the timed loop once, untimed, as nccl-tests and
        # mccl-perf do: what a backend makes for as many operations in
        # flight (host buffers, registrations) is made before the clock
        warm = time_allreduce(y, n_it)
        if b >= 8 << 20:	# every rank has the slowest's warm: alike
            more = min(iters, math.ceil(SPAN_S / warm))
            if more > n_it:	# warm for as many in flight as timed
                n_it = more
                time_allreduce(y, n_it)
        t = time_allreduce(y, n_it)
        wrong = wrong_elements(x, n)
        alg = b / t / 1e9
        if rank == 0:
            print(f"{b:12d} {count:10d} {t * 1e6:10.1f} {alg:8.3f} "
                  f"{alg * 2 * (n - 1) / n:8.3f} {wrong:6d}", flush=True)
        b *= 2
    dist.destroy_process_group()


def spawn_ranks(n):
    """Run this script as n local ranks; the first failure is the result."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable] + sys.argv, env=env))
    codes = [p.wait() for p in procs]
    return next((c for c in codes if c != 0), 0)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.split("Usage: ")[1])
    n, minb, maxb, iters = (int(a) for a in sys.argv[1:])
    if "RANK" not in os.environ:
        sys.exit(spawn_ranks(n))
    run_rank(minb, maxb, iters)


if __name__ == "__main__":
    main()
