"""torch_name.py CASE: the backend's name where another plugin may hold
"mccl" (Meta's torchcomms registers one).  free: "mccl"; taken: a fake
plugin registers "mccl" first, and MCCL's backend is "mccld", said on
stderr; MCCL_TORCH_BACKEND chooses a name outright, and one another
plugin holds is refused.  A group of one on the chosen name then runs
(no daemon needed).  Prints "name NAME" and "ok"."""
import sys
import tempfile

import torch
import torch.distributed as dist

if sys.argv[1] == "taken":
    dist.Backend.register_backend("mccl", lambda *a: None)
import mccl.torch  # noqa: E402

print("name", mccl.torch.BACKEND_NAME)
store = tempfile.mktemp(prefix="mccl-name-")
dist.init_process_group(mccl.torch.BACKEND_NAME,
                        store=dist.FileStore(store, 1), rank=0, world_size=1)
t = torch.ones(2)
dist.all_reduce(t)
dist.destroy_process_group()
print("ok" if t.tolist() == [1.0, 1.0] else "FAIL %s" % t.tolist())
