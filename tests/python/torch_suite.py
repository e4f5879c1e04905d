"""torch_suite.py [unittest arguments]: PyTorch's own distributed tests,
DistributedTest._DistTestBase of torch's distributed_test.py, as torch's
test_distributed_spawn.py runs them, against a backend (run by
tests/python/torch_suite.sh, which starts the daemons).

Environment: BACKEND (mccl, or gloo to compare), WORLD_SIZE, TEMP_DIR
(torch's), MCCL_SOCKETS (the daemons' sockets, comma-separated: the ranks
are spread over them in order), OPEN_GATES=1 to run the tests whose gate
names gloo too (the gates are read when the module is imported),
SUITE_SHARD=I/N to run the I-th of N parts (every N-th test by name, from
the I-th; 0 <= I < N).  CUDA is hidden: these are the CPU-tensor tests.
"""

import logging
import os
import sys

BACKEND = os.environ["BACKEND"]
# torch's test helpers read CI=1 (as CI machines set it) as "write XML
# reports", which needs xmlrunner, a package Debian does not ship.
os.environ.pop("CI", None)
# The suite runs CPU tensors; its harness skips every test where CUDA has
# fewer devices than ranks (TEST_SKIPS "multi-gpu"), as on a one-GPU host.
os.environ["CUDA_VISIBLE_DEVICES"] = ""
if os.environ.get("OPEN_GATES") == "1":
    os.environ["BACKEND"] = "gloo"	# the gates see gloo ...

import mccl.torch  # noqa: E402,F401 (registers the backend)
import unittest  # noqa: E402

from torch.testing._internal import common_utils  # noqa: E402
from torch.testing._internal.distributed import \
    distributed_test as dt  # noqa: E402

os.environ["BACKEND"] = dt.BACKEND = BACKEND	# ... the tests run BACKEND
logging.getLogger().setLevel(logging.WARNING)	# torch's helpers say INFO


class TestDistBackendWithSpawn(dt.TestDistBackend,
                               dt.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()

    @classmethod
    def _run(cls, rank, *args, **kwargs):   # torch 2.x adds arguments
        socks = os.environ.get("MCCL_SOCKETS", "").split(",")
        if socks[0]:
            os.environ["MCCL_SOCKET"] = socks[
                rank * len(socks) // int(os.environ["WORLD_SIZE"])]
        super()._run(rank, *args, **kwargs)


def shard_names():
    """The tests of SUITE_SHARD's part, as unittest names them; [] if
    no SUITE_SHARD (then unittest's own arguments choose)."""
    shard = os.environ.get("SUITE_SHARD", "")
    if not shard:
        return []
    i, n = (int(x) for x in shard.split("/"))
    if not 0 <= i < n:
        sys.exit(f"SUITE_SHARD={shard}: want I/N with 0 <= I < N")
    names = unittest.TestLoader().getTestCaseNames(TestDistBackendWithSpawn)
    return [f"TestDistBackendWithSpawn.{t}" for t in sorted(names)[i::n]]


if __name__ == "__main__":
    # torch reads the test names from sys.argv: torch 1.x at import (into
    # UNITTEST_ARGS, run_tests' default), torch 2 in run_tests itself.
    names = shard_names()
    sys.argv += names
    parsed = getattr(common_utils, "UNITTEST_ARGS", None)
    if isinstance(parsed, list) and parsed and parsed is not sys.argv:
        parsed += names
    sys.exit(common_utils.run_tests())
