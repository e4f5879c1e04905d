"""ddp_wire.py OUT MODE: 200 steps of DDP training on backend mccl (run
under torchrun by tests/python/run.sh), its gradients summed one of three
ways: MODE fp32 (as they are), wire (mccl.torch.set_wire_dtype("bf16"):
float32 summed on every node, bfloat16 between nodes) or hook (torch's
bf16_compress_hook as torch writes it, under another name since torch
refuses its own, by name, on any backend but NCCL: the gradients cast to
bfloat16 on the client and summed in bfloat16).  Rank 0 saves the final
parameters, the mean loss of the last 20 steps and how many of its node's
allreduces crossed on a 16-bit wire to OUT.pt, for ddp_wire_compare.py.

The model has about 200 k parameters, one bucket of 800 kB; run.sh sets
MCCL_ALGO=ring, the algorithm the wire applies to.
"""

import sys

import torch
import torch.distributed as dist

import mccl.torch

STEPS = 200


def bf16_sum_hook(state, bucket):
    """torch's default_hooks.bf16_compress_hook: cast, divide, sum in
    bfloat16, cast back into the bucket."""
    buf = bucket.buffer()
    low = buf.to(torch.bfloat16).div_(dist.get_world_size())
    fut = dist.all_reduce(low, async_op=True).get_future()

    def back(f):
        buf.copy_(f.value()[0])
        return buf
    return fut.then(back)


def main():
    out, mode = sys.argv[1], sys.argv[2]
    dist.init_process_group("mccl")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(7)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 512), torch.nn.Tanh(),
        torch.nn.Linear(512, 256), torch.nn.Tanh(),
        torch.nn.Linear(256, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    if mode == "wire":
        mccl.torch.set_wire_dtype("bf16")
    elif mode == "hook":
        ddp.register_comm_hook(None, bf16_sum_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(4321 + rank)
    teacher = torch.Generator().manual_seed(99)
    w_true = torch.randn(64, 10, generator=teacher)
    loss_fn = torch.nn.CrossEntropyLoss()
    last = []
    for step in range(STEPS):
        x = torch.randn(32, 64, generator=gen)
        y = (x @ w_true).argmax(1)
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        if step >= STEPS - 20:
            last.append(loss.item())
    mean = torch.tensor([sum(last) / len(last)])
    dist.all_reduce(mean)
    stats = mccl.torch._mccl_group(None)._comm.stats()
    here = [n for n in stats["nodes"] if n.get("wire_ops", 0) > 0]
    if rank == 0:
        torch.save({"params": {k: v.detach().clone() for k, v in
                               model.state_dict().items()},
                    "loss": mean.item() / size,
                    "wire_ops": sum(n["wire_ops"] for n in here)},
                   out + ".pt")
        print("%s: loss %.5f, %d allreduces on a 16-bit wire here" % (
            mode, mean.item() / size, sum(n["wire_ops"] for n in here)))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
