"""ddp_compare.py MCCL_OUT GLOO_OUT NRANKS: the parameters ddp_train.py
left after training on each backend.

- MCCL's ranks must hold bit-identical parameters (the daemons write one
  result to every rank).
- MCCL against gloo: equal within float32 rounding.  Both sum the same
  gradients, in a different order (MCCL: the ranks of a node in shared
  memory, then the nodes; gloo: its ring), so each summed gradient may
  differ by a few units in the last place (float32: 2^-23 relative).
  Over 6 steps of SGD with momentum at lr 0.05, that moves a parameter by
  about 1e-7; the bound, rtol 1e-5 and atol 1e-6, leaves two orders of
  magnitude and is still far below the training's own movement, which is
  checked too (the parameters moved away from rank 0's initial ones by
  more than 1e-3), so that agreeing is not trivial.
Prints "ok"/"FAIL" lines; exits 1 on any failure.
"""

import sys

import torch

from checklib import check
import checklib


def load(prefix, rank):
    return torch.load("%s.%d.pt" % (prefix, rank))


def main():
    mccl_out, gloo_out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])

    m = [load(mccl_out, r) for r in range(n)]
    g = [load(gloo_out, r) for r in range(n)]
    check("DDP on mccl: every rank's parameters bit-identical",
          all(torch.equal(m[0][k], m[r][k]) for r in range(n) for k in m[0]))
    check("DDP on gloo: every rank's parameters equal (the reference)",
          all(torch.equal(g[0][k], g[r][k]) for r in range(n) for k in g[0]))
    diff = max((m[0][k] - g[0][k]).abs().max().item() for k in m[0])
    close = all(torch.allclose(m[0][k], g[0][k], rtol=1e-5, atol=1e-6)
                for k in m[0])
    check("DDP on mccl against gloo: within rtol 1e-5, atol 1e-6 (max "
          "difference %.3g)" % diff, close)
    torch.manual_seed(100)		# rank 0's initial parameters
    init = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10)).state_dict()
    moved = max((m[0][k] - init[k]).abs().max().item() for k in init)
    check("training moved the parameters (by up to %.3g)" % moved,
          moved > 1e-3)
    sys.exit(1 if checklib.failed else 0)


if __name__ == "__main__":
    main()
