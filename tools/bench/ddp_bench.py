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
for tools/bench/report.py.  BENCH_TRACE=1 (with a backend) also prints,
for the last step, when each gradient bucket's allreduce was called and
when it completed, against backward's start and end (through a comm hook
that does what DDP's default does, with the times taken around it).
"""

import contextlib
import os
import sys
import time

import torch


class Trace:
    """The times of one step: backward's start and end, and each bucket's
    allreduce (called, completed)."""

    def __init__(self):
        self.buckets = {}	# index: [bytes, called, completed]
        self.start = self.end = 0.0

    def hook(self, state, bucket):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        entry = [bucket.buffer().numel() * bucket.buffer().element_size(),
                 time.perf_counter(), None]
        self.buckets[bucket.index()] = entry

        def done(fut):
            entry[2] = time.perf_counter()
            return fut.value()
        return default_hooks.allreduce_hook(state, bucket).then(done)

    def report(self):
        ms = lambda t: (t - self.start) * 1e3		# noqa: E731
        last = max((c for _, c, _ in self.buckets.values()), default=0)
        print("trace: backward %.1f ms, its last bucket called at %.1f ms"
              % (ms(self.end), ms(last) if last else 0.0))
        for i in sorted(self.buckets, key=lambda k: self.buckets[k][1]):
            b, c, d = self.buckets[i]
            print("trace: bucket %d, %.1f MB: called at %.1f ms, completed "
                  "at %.1f ms (%.1f ms)" % (i, b / 1e6, ms(c), ms(d),
                                            (d - c) * 1e3))
        sys.stdout.flush()


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
    trace = None
    if backend != "none" and os.environ.get("BENCH_TRACE") == "1":
        trace = Trace()
        net.register_comm_hook(None, trace.hook)
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
            loss = loss_fn(net(x), y)
            if trace is not None:
                trace.buckets, trace.start = {}, time.perf_counter()
            loss.backward()
            if trace is not None:
                trace.end = time.perf_counter()
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
        if trace is not None:
            trace.report()
    if backend != "none":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
