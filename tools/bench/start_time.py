"""start_time.py: how long a torch.distributed job takes to start, the
scale case's job start: each rank, once its imports are done, notes the
wall clock, runs init_process_group(BACKEND) and one 8-byte all_reduce,
and prints "# start RANK T0 T1" (seconds since the epoch).  The harness
takes the last rank's T0 (no job can form before it) to the last rank's
T1.  Every rank runs in one host's namespace of the same machine, so all
read one clock.
One process per rank: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the
environment (and MCCL_SOCKET for mccl).

The store the ranks meet in is up before the first rank starts, as
torchrun's agent's is: "start_time.py store NRANKS" hosts it on
MASTER_ADDR:MASTER_PORT, and the ranks, with TORCHELASTIC_USE_AGENT_STORE
set as torchrun sets it, connect to it.  (Where rank 0 hosts it, ranks
that start before rank 0 find no store and retry a second later, and that
second, not either backend, was most of a 128-rank start.)  It prints
"# store up" once it listens and ends when killed or after 10 minutes.
Usage: start_time.py gloo|mccl | start_time.py store NRANKS"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist


def serve_store(n):
    store = dist.TCPStore(os.environ["MASTER_ADDR"],
                          int(os.environ["MASTER_PORT"]), n, True,
                          datetime.timedelta(seconds=600),
                          wait_for_workers=False)
    print("# store up", flush=True)
    time.sleep(600)
    del store


def main():
    backend = sys.argv[1] if len(sys.argv) > 1 else "gloo"
    if backend == "store":
        serve_store(int(sys.argv[2]))
        return
    if backend == "mccl":
        import mccl.torch  # noqa: F401 (registers "mccl")
    rank = int(os.environ["RANK"])
    n = int(os.environ["WORLD_SIZE"])
    t0 = time.time()
    dist.init_process_group(backend, rank=rank, world_size=n)
    x = torch.ones(2, dtype=torch.float32)
    dist.all_reduce(x)
    t1 = time.time()
    if x[0].item() != n:
        sys.exit(f"rank {rank}: all_reduce gave {x[0].item()}, not {n}")
    print(f"# start {rank} {t0:.6f} {t1:.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
