"""ddp_wire_compare.py FP32 WIRE HOOK: what ddp_wire.py left in each mode.

- The bfloat16 wire was used: the wire run's node counted an allreduce a
  step on it; the float32 run's none.
- The training ends where float32's does: the mean loss of the last 20
  steps within 1 % of float32's (the issue's target for 200 steps).
- Closer to float32 than torch's bf16_compress_hook, which sums in
  bfloat16: the wire's parameters nearer float32's than the hook's (norm
  of the difference over every parameter).
Prints "ok"/"FAIL" lines; exits 1 on any failure.
"""

import sys

import torch

from checklib import check
import checklib


def distance(a, b):
    return sum(((a[k] - b[k]) ** 2).sum().item() for k in a) ** 0.5


def main():
    fp32, wire, hook = (torch.load(p + ".pt") for p in sys.argv[1:4])
    check("the wire run summed on a bfloat16 wire, the float32 run did not",
          wire["wire_ops"] >= 200 and fp32["wire_ops"] == 0,
          (wire["wire_ops"], fp32["wire_ops"]))
    rel = abs(wire["loss"] - fp32["loss"]) / fp32["loss"]
    check("final loss on the bfloat16 wire within 1 %% of float32's "
          "(%.5f against %.5f: %.3f %%)" % (wire["loss"], fp32["loss"],
                                           100 * rel), rel <= 0.01)
    dw = distance(wire["params"], fp32["params"])
    dh = distance(hook["params"], fp32["params"])
    check("parameters closer to float32's than bf16_compress_hook's "
          "(%.3g against %.3g)" % (dw, dh), dw < dh)
    check("the training moved the parameters (the comparison is not "
          "trivial)", dw > 0 and dh > 0, (dw, dh))
    sys.exit(1 if checklib.failed else 0)


if __name__ == "__main__":
    main()
