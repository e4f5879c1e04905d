"""ddp_fault.py MODE [DEVICE]: a DDP training loop on backend "mccl" in
which one rank fails at step 20, as one rank of 2 nodes x 2 ranks (run by
tests/python/run.sh), its model on DEVICE: cpu (default) or cuda (GPU 0,
which the ranks share).  MODE: kill (the last rank SIGKILLs itself), stop
(it SIGSTOPs itself: the others' operations time out, MCCL_OP_TIMEOUT_MS),
abort (rank 0 aborts the job, mccl.torch.abort).  Every other rank must
raise, not crash: it prints "raised TYPE after S s: MESSAGE" and exits 3
after leaving its group.  Exit 4 if training ended without an error.
"""

import faulthandler
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import mccl.torch

FAIL_STEP = 20


def main():
    mode = sys.argv[1]
    dev = torch.device("cuda", 0) if sys.argv[2:] == ["cuda"] else \
        torch.device("cpu")
    faulthandler.enable()
    dist.init_process_group("mccl")
    rank, size = dist.get_rank(), dist.get_world_size()
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10)).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model,
                                                    bucket_cap_mb=0.05)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    failed_at = None
    try:
        for step in range(100000):
            if step == FAIL_STEP:
                failed_at = time.monotonic()
                if mode == "kill" and rank == size - 1:
                    os.kill(os.getpid(), signal.SIGKILL)
                if mode == "stop" and rank == size - 1:
                    print("stopping", flush=True)
                    os.kill(os.getpid(), signal.SIGSTOP)
                if mode == "abort" and rank == 0:
                    mccl.torch.abort()
            opt.zero_grad()
            ddp(torch.randn(8, 64, device=dev)).sum().backward()
            opt.step()
            if dev.type == "cuda":	# a failure surfaces in this step
                torch.cuda.synchronize(dev)
    except Exception as e:		# noqa: BLE001 (what the test checks)
        print("raised %s after %.2f s: %s" % (
            type(e).__name__, time.monotonic() - failed_at, e), flush=True)
        dist.destroy_process_group()
        sys.exit(3)
    sys.exit(4)


if __name__ == "__main__":
    main()
