"""torch_layers.py: where a torch all_reduce's time goes, layer by layer.

One rank of a 2-or-more-rank job on backend mccl (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT and MCCL_SOCKET set; tools/bench/README.md shows
the loopback commands).  For each size (1 KiB and 1 MiB by default) and
device (cpu, and cuda where the rank has a GPU), alternates in rounds the
same float32 sum, in place, called at four depths:
  C        mccl_allreduce on the tensor's memory, through ctypes, blocking
           (what any binding pays: the daemon and the wire);
  copies   CUDA only: the tensor to page-locked host memory and back on
           its stream, synchronized (what staging costs, no network);
  backend  the group's allreduce([t]).wait(): the backend's own layer;
  torch    torch.distributed.all_reduce(t): torch's Python above it;
then prints per-call medians over the rounds and what each layer adds.
Usage: torch_layers.py [SIZE_BYTES...]"""
import ctypes
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import mccl
import mccl.torch
from mccl import _lib

ROUNDS = 7


def per_call_us(fn, sync, n):
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - t0) / n * 1e6


def layers(pg, handle, t):
    """name -> a call of the same all_reduce at that depth."""
    opts = dist.AllreduceOptions()
    out = {}
    if t.device.type == "cpu":
        ptr = ctypes.c_void_p(t.data_ptr())
        lib = _lib.load()
        out["C"] = lambda: lib.mccl_allreduce(ptr, ptr, t.numel(),
                                              mccl.FLOAT32, mccl.SUM, handle,
                                              None)
    else:
        host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)

        def copies():
            host.copy_(t, non_blocking=True)
            t.copy_(host, non_blocking=True)
            torch.cuda.current_stream().synchronize()
        out["copies"] = copies
    out["backend"] = lambda: pg.allreduce([t], opts).wait()
    out["torch"] = lambda: dist.all_reduce(t)
    return out


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [1024, 1 << 20]
    rank = int(os.environ["RANK"])
    devices = ["cpu"]
    if torch.cuda.is_available():
        torch.cuda.set_device(rank % torch.cuda.device_count())
        devices.append("cuda")
    dist.init_process_group("mccl")
    pg = mccl.torch._mccl_group(None)
    handle = ctypes.c_void_p(pg._comm_handle) if hasattr(
        pg, "_comm_handle") else pg._comm._handle
    if rank == 0:
        print("# backend %s, torch %s, %d ranks" % (
            "native" if hasattr(pg, "_comm_handle") else "python",
            torch.__version__, dist.get_world_size()))
        print("# %-6s %9s %9s %9s %9s %9s  (us per call, medians)" % (
            "device", "bytes", "C", "copies", "backend", "torch"))
    for dev in devices:
        sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
        for size in sizes:
            t = torch.ones(size // 4, device=dev)
            calls = layers(pg, handle, t)
            n = max(20, min(500, (50 << 20) // size))
            got = {k: [] for k in calls}
            for _ in range(ROUNDS):
                for k, fn in calls.items():
                    got[k].append(per_call_us(fn, sync, n))
            med = {k: statistics.median(v) for k, v in got.items()}
            if rank == 0:
                print("  %-6s %9d %9s %9s %9.1f %9.1f" % (
                    dev, size,
                    "%.1f" % med["C"] if "C" in med else "-",
                    "%.1f" % med["copies"] if "copies" in med else "-",
                    med["backend"], med["torch"]), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
