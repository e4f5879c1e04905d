"""CUDA buffers for mccl.Comm's collectives: a torch CUDA tensor, or any
object with __cuda_array_interface__ (CuPy's, Numba's: seen through torch,
without a copy), is copied to the host, the operation runs on the copy,
and the result is copied back into it: at once for the blocking calls,
when the request completes for the non-blocking ones.  The copies follow
the current CUDA stream as torch's .to() and .copy_() do: the copy out
waits for the work queued on it, the copy back is queued on it.  An
output the call makes itself (out=None) is a torch tensor on the
device.  torch is imported only when a CUDA buffer is met.

(The torch backend, mccl.torch, stages CUDA tensors its own way: page-
locked memory the daemon shares, asynchronous copies.)
"""

import functools


def _cuda_object(obj):
    """obj as a torch CUDA tensor, or None if it lives on the host."""
    if not _is_cuda(obj):
        return None
    if getattr(obj, "is_cuda", None) is None:
        import torch
        if not torch.cuda.is_available():
            raise TypeError("mccl: a %s with __cuda_array_interface__, but "
                            "torch sees no CUDA device to copy it from" %
                            type(obj).__name__)
        return torch.as_tensor(obj, device="cuda")
    return obj


class _Staging:
    """One call's CUDA buffers and their host copies."""

    def __init__(self, copy_back):
        self._pairs = []	# (CUDA tensor, host copy, the caller's object)
        self._copy_back = copy_back
        self.device = None

    def host(self, obj):
        t = _cuda_object(obj)
        if t is None:
            return obj
        if self.device is not None and t.device != self.device:
            raise ValueError("mccl: buffers on %s and %s in one call" %
                             (self.device, t.device))
        self.device = t.device
        h = t.to("cpu").contiguous()
        self._pairs.append((t, h, obj))
        return h

    def back(self, result):
        """Copy the results back; result, in the caller's terms."""
        if self._copy_back:
            for t, h, _ in self._pairs:
                t.copy_(h.view_as(t))
        for _, h, obj in self._pairs:
            if result is h:
                return obj
        if getattr(result, "is_cpu", False) and self.device is not None:
            return result.to(self.device)
        return result


class _Request:
    """A non-blocking call's Request whose buffers were staged: the copy
    back happens once, when it completes."""

    def __init__(self, req, staging):
        self._req = req
        self._staging = staging
        self._result = None
        self._finished = False

    def _finish(self, result):
        if not self._finished:
            self._result = self._staging.back(result)
            self._finished = True
        return self._result

    def wait(self, timeout=None):
        return self._finish(self._req.wait(timeout))

    def test(self):
        if not self._req.test():
            return False
        self._finish(self._req.wait())
        return True

    @property
    def done(self):
        return self._req.done

    @property
    def source(self):
        return self._req.source

    @property
    def tag(self):
        return self._req.tag


def _is_cuda(a):
    """A torch tensor says (asking it for __cuda_array_interface__ would
    raise, on some devices other than AttributeError); others have the
    interface or not."""
    is_cuda = getattr(a, "is_cuda", None)
    if is_cuda is not None:
        return is_cuda is True
    return hasattr(a, "__cuda_array_interface__")


def _has_cuda(args, kwargs):
    """Any CUDA buffer among the arguments (no allocation: the host path's
    one cost)."""
    for a in args:
        if _is_cuda(a):
            return True
    for a in kwargs.values():
        if _is_cuda(a):
            return True
    return False


def staged(method, nonblocking, copy_back=True):
    """method taking CUDA buffers too (see the module's documentation);
    copy_back=False for a call that only reads its buffers (send)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        if not _has_cuda(args, kwargs):		# the host path: untouched
            return method(self, *args, **kwargs)
        s = _Staging(copy_back)
        args = [s.host(a) for a in args]
        kwargs = {k: s.host(v) for k, v in kwargs.items()}
        result = method(self, *args, **kwargs)
        return _Request(result, s) if nonblocking else s.back(result)
    return run
