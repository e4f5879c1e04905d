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
client, summed in bfloat16), against MCCL_WIRE_DTYPE=bf16;
BENCH_HOOK=noop one that hands each bucket back at once, unreduced: DDP's
own work on its buckets (the gradients copied in and out) without any
communication.  BENCH_BUCKET_VIEW=1 makes the gradients views into the
buckets (DDP's gradient_as_bucket_view), which saves those copies.  Rank
0 prints one line,
    ddp backend=B ranks=N batch=G params=P steps=S samples_per_s=X
for tools/bench/report.py.  BENCH_TRACE=1 (with a backend) also prints,
on every rank: each timed step's backward (from its start to its end,
where DDP waits for the last bucket) and its tail (from the last bucket's
call to that end); for the last step, when each bucket's allreduce was
called and when it completed (through a comm hook that does what DDP's
default does, or BENCH_HOOK's, with the times taken around it), and
backward's start on the monotonic clock, which the daemons' debug log of
each operation uses too; then the largest bucket's allreduce three times
more on its own, after a barrier.
"""

import contextlib
import os
import sys
import time

import torch


class Trace:
    """The times of each step: backward's start and end, and each bucket's
    allreduce (called, completed)."""

    def __init__(self, base):
        self.base = base	# the comm hook timed
        self.buckets = {}	# index: [bytes, called, completed]
        self.start = self.end = 0.0
        self.steps = []		# (backward, tail) of each step, in ms

    def begin(self):
        self.buckets, self.start = {}, time.perf_counter()

    def finish(self, timed):
        self.end = time.perf_counter()
        if timed:
            self.steps.append(((self.end - self.start) * 1e3,
                               (self.end - self.last_call()) * 1e3))

    def last_call(self):
        return max((c for _, c, _ in self.buckets.values()),
                   default=self.start)

    def hook(self, state, bucket):
        entry = [bucket.buffer().numel() * bucket.buffer().element_size(),
                 time.perf_counter(), None]
        self.buckets[bucket.index()] = entry

        def done(fut):
            entry[2] = time.perf_counter()
            return fut.value()
        return self.base(state, bucket).then(done)

    def alone(self, rank, device, times=3):
        """The largest bucket's allreduce again, with nothing beside it: a
        tensor of its size, after a barrier, `times` times."""
        import torch.distributed as dist
        nbytes = max((b for b, _, _ in self.buckets.values()), default=0)
        t = torch.ones(nbytes // 4, device=device)
        for _ in range(times):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            if device.type == "cuda":
                torch.cuda.synchronize()
            print("trace: rank %d: alone, an allreduce of %.1f MB from "
                  "%.3f ms (monotonic) took %.1f ms"
                  % (rank, nbytes / 1e6, t0 * 1e3,
                     (time.perf_counter() - t0) * 1e3))

    def report(self, rank):
        ms = lambda t: (t - self.start) * 1e3		# noqa: E731
        print("trace: rank %d: each step's backward, ms: %s; its tail after "
              "the last bucket's call: %s" % (rank, " ".join(
                  "%.1f" % b for b, _ in self.steps), " ".join(
                  "%.1f" % t for _, t in self.steps)))
        print("trace: rank %d: the last step's backward from %.3f ms "
              "(monotonic) for %.1f ms, its last bucket called at %.1f ms"
              % (rank, self.start * 1e3, ms(self.end),
                 ms(self.last_call())))
        for i in sorted(self.buckets, key=lambda k: self.buckets[k][1]):
            b, c, d = self.buckets[i]
            print("trace: rank %d: bucket %d, %.1f MB: called at %.1f ms, "
                  "completed at %.1f ms (%.1f ms)"
                  % (rank, i, b / 1e6, ms(c), ms(d), (d - c) * 1e3))
        sys.stdout.flush()


def noop_hook(state, bucket):
    """A comm hook that communicates nothing: the bucket, as it is."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


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
    trace = None
    if backend != "none":
        import torch.distributed as dist
        import mccl.torch  # noqa: F401 (registers "mccl")
        dist.init_process_group(backend)
        rank, size = dist.get_rank(), dist.get_world_size()
        net = torch.nn.parallel.DistributedDataParallel(
            net, gradient_as_bucket_view=os.environ.get(
                "BENCH_BUCKET_VIEW") == "1")
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        hook = {"bf16": default_hooks.bf16_compress_hook,
                "noop": noop_hook}.get(os.environ.get("BENCH_HOOK", ""))
        if os.environ.get("BENCH_TRACE") == "1":
            trace = Trace(hook or default_hooks.allreduce_hook)
            hook = trace.hook
        if hook is not None:
            net.register_comm_hook(None, hook)
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
                trace.begin()
            loss.backward()
            if trace is not None:
                trace.finish(step >= warmup)
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
        trace.report(rank)
        trace.alone(rank, device)
    if backend != "none":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
