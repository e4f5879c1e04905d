"""What a buffer handed to mccl is: its address, element count and MCCL
dtype, checked before anything is sent.

Accepted: CPU torch tensors, numpy arrays, and any object with the buffer
protocol (bytearray, memoryview, array.array; bytes as a source only).
Each must be contiguous.  A wrong type is a TypeError, a wrong layout or
size a ValueError, raised here, before the daemon hears of the call.
"""

import ctypes

# MCCL dtype codes (mccl.h mccl_dtype_t), with their sizes and names.
INT8, UINT8, INT32, UINT32, INT64, UINT64 = 0, 1, 2, 3, 4, 5
FLOAT16, BFLOAT16, FLOAT32, FLOAT64 = 6, 7, 8, 9
DTYPE_NAMES = ("int8", "uint8", "int32", "uint32", "int64", "uint64",
               "float16", "bfloat16", "float32", "float64")
DTYPE_SIZES = (1, 1, 4, 4, 8, 8, 2, 2, 4, 8)

_BY_NAME = {n: i for i, n in enumerate(DTYPE_NAMES)}
_NUMPY = {"|i1": INT8, "|u1": UINT8, "<i4": INT32, "<u4": UINT32,
          "<i8": INT64, "<u8": UINT64, "<f2": FLOAT16, "<f4": FLOAT32,
          "<f8": FLOAT64}		# by numpy's dtype.str, little-endian
_TORCH = {"torch.int8": INT8, "torch.uint8": UINT8, "torch.int32": INT32,
          "torch.int64": INT64, "torch.float16": FLOAT16,
          "torch.bfloat16": BFLOAT16, "torch.float32": FLOAT32,
          "torch.float64": FLOAT64,
          "torch.uint32": UINT32, "torch.uint64": UINT64}	# torch >= 2.3
# struct/memoryview format characters, by item size where it varies.
_FORMAT = {("b", 1): INT8, ("B", 1): UINT8, ("c", 1): UINT8,
           ("e", 2): FLOAT16, ("i", 4): INT32,
           ("I", 4): UINT32, ("l", 8): INT64, ("L", 8): UINT64,
           ("q", 8): INT64, ("Q", 8): UINT64, ("f", 4): FLOAT32,
           ("d", 8): FLOAT64}


def dtype_code(dtype):
    """An MCCL dtype code from a code, a name, or a numpy or torch dtype."""
    if isinstance(dtype, int) and 0 <= dtype < len(DTYPE_NAMES):
        return dtype
    if isinstance(dtype, str) and dtype in _BY_NAME:
        return _BY_NAME[dtype]
    name = str(dtype)
    if name in _TORCH:
        return _TORCH[name]
    if name in _BY_NAME:		# numpy dtypes print as their names
        return _BY_NAME[name]
    raise TypeError("mccl: unknown dtype %r (expected one of %s)" %
                    (dtype, ", ".join(DTYPE_NAMES)))


class Buf:
    """One checked buffer: the object, kept alive while the daemon may
    use its memory, its address, element count and dtype."""

    __slots__ = ("obj", "ptr", "count", "dtype", "nbytes", "kind", "keep")

    def __init__(self, obj, ptr, count, dtype, kind, keep=None):
        self.obj = obj
        self.ptr = ptr
        self.count = count
        self.dtype = dtype
        self.nbytes = count * DTYPE_SIZES[dtype]
        self.kind = kind	# "torch", "numpy" or "buffer"
        self.keep = keep	# what holds the address (an export)


def _retype(what, nbytes, want):
    """How many elements of dtype want nbytes hold."""
    size = DTYPE_SIZES[want]
    if nbytes % size:
        raise ValueError("mccl: %s: %d bytes are not a whole number of %s "
                         "elements" % (what, nbytes, DTYPE_NAMES[want]))
    return nbytes // size


# dtype objects (numpy's, torch's) to codes, filled as they are met: a
# dict lookup on the hot path instead of string work.
_BY_DTYPE = {}


def _code_of(dt, table):
    code = _BY_DTYPE.get(dt)
    if code is None:
        key = dt.str if hasattr(dt, "str") else str(dt)
        code = table.get(key, -1)
        _BY_DTYPE[dt] = code
    return code


def _torch(t, what, writable, want):
    if not t.is_cpu:
        raise TypeError("mccl: %s: a tensor on %s; mccl works on CPU and "
                        "CUDA tensors" % (what, t.device))
    if not t.is_contiguous():
        raise ValueError("mccl: %s: the tensor is not contiguous (call "
                         ".contiguous() and copy the result back)" % what)
    dtype = _code_of(t.dtype, _TORCH)
    count = t.numel()
    if want is not None:
        count = _retype(what, count * t.element_size(), want)
        dtype = want
    elif dtype < 0:
        raise TypeError("mccl: %s: tensor dtype %s is not one of mccl's "
                        "(%s)" % (what, t.dtype, ", ".join(DTYPE_NAMES)))
    return Buf(t, t.data_ptr(), count, dtype, "torch")


def _numpy(a, what, writable, want):
    flags = a.flags
    if not flags.c_contiguous:
        raise ValueError("mccl: %s: the array is not contiguous (use "
                         "numpy.ascontiguousarray and copy the result "
                         "back)" % what)
    if writable and not flags.writeable:
        raise ValueError("mccl: %s: the array is read-only" % what)
    dtype = _code_of(a.dtype, _NUMPY)
    count = a.size
    if want is not None:
        count = _retype(what, a.nbytes, want)
        dtype = want
    elif dtype < 0:
        raise TypeError("mccl: %s: array dtype %s is not one of mccl's "
                        "(%s)" % (what, a.dtype, ", ".join(DTYPE_NAMES)))
    return Buf(a, a.__array_interface__["data"][0], count, dtype, "numpy")


def _buffer(obj, what, writable, want):
    try:
        m = memoryview(obj)
    except TypeError:
        raise TypeError("mccl: %s: %s is not a buffer (expected a CPU "
                        "torch tensor, a numpy array or an object with the "
                        "buffer protocol)" % (what, type(obj).__name__)) \
            from None
    if not m.c_contiguous:
        raise ValueError("mccl: %s: the buffer is not contiguous" % what)
    dtype = _FORMAT.get((m.format.lstrip("@=<"), m.itemsize))
    count = m.nbytes // m.itemsize if m.itemsize else 0
    if want is not None:
        count = _retype(what, m.nbytes, want)
        dtype = want
    elif dtype is None:
        raise TypeError("mccl: %s: buffer format %r is not one of mccl's "
                        "dtypes" % (what, m.format))
    if m.readonly:
        if writable:
            raise ValueError("mccl: %s: the buffer is read-only" % what)
        keep = ctypes.create_string_buffer(m.tobytes(), m.nbytes)
    else:
        keep = (ctypes.c_char * m.nbytes).from_buffer(m)
    return Buf(obj, ctypes.addressof(keep), count, dtype, "buffer", keep)


def _handler(cls):
    """How objects of class cls are read, found once per class."""
    names = {c.__name__ for c in cls.__mro__}
    if "Tensor" in names and hasattr(cls, "data_ptr"):
        return _torch
    if "ndarray" in names and hasattr(cls, "__array_interface__"):
        return _numpy
    return _buffer


_HANDLERS = {}


def view(obj, what, writable=False, dtype=None):
    """Check obj and describe its memory; dtype reinterprets its bytes."""
    cls = type(obj)
    h = _HANDLERS.get(cls)
    if h is None:
        h = _HANDLERS[cls] = _handler(cls)
    return h(obj, what, writable, None if dtype is None else
             dtype_code(dtype))


def like(b, count, shape=None):
    """A new buffer of count elements of b's kind and dtype (an output)."""
    if b.kind == "torch":
        import torch
        out = torch.empty(count, dtype=b.obj.dtype, device="cpu")
    elif b.kind == "numpy":
        import numpy
        out = numpy.empty(count, dtype=b.obj.dtype)
    else:
        return memoryview(bytearray(count * DTYPE_SIZES[b.dtype])).cast(
            _MEMORYVIEW_FORMAT[b.dtype])
    return out.reshape(shape) if shape is not None else out


# The format of a new memoryview of each dtype (bfloat16: its bits).
_MEMORYVIEW_FORMAT = ("b", "B", "i", "I", "q", "Q", "e", "H", "f", "d")
