"""test_alone.py: the Python package with no launcher and no daemon: the
world of one rank, the checks made before anything is sent, the error
classes, dtypes and mccl.empty.  Run with no MCCL_* or launcher variables
set (tests/python/run.sh does), and MCCL_LIBRARY pointing nowhere: a world
of one must not need the C library at all.
"""

import array
import os
import unittest

import numpy
import torch

import mccl
from mccl import _buffers


class Alone(unittest.TestCase):
    def setUp(self):
        self.w = mccl.init()

    def test_world_of_one(self):
        self.assertEqual((self.w.rank, self.w.size), (0, 1))
        self.assertTrue(self.w.alone)
        self.assertIs(mccl.init(), self.w)

    def test_collectives_return_their_input(self):
        w = self.w
        x = numpy.arange(6, dtype=numpy.float32)
        self.assertIs(w.allreduce(x), x)
        self.assertTrue(numpy.array_equal(x, numpy.arange(6)))
        out = numpy.zeros(6, dtype=numpy.float32)
        self.assertIs(w.allreduce(x, out=out, op=mccl.MAX), out)
        self.assertTrue(numpy.array_equal(out, x))
        self.assertTrue(numpy.array_equal(w.broadcast(x), x))
        self.assertEqual(w.allgather(x).shape, (1, 6))
        self.assertTrue(numpy.array_equal(w.reduce_scatter(x), x))
        self.assertTrue(numpy.array_equal(w.alltoall(x), x))
        t = torch.arange(4, dtype=torch.bfloat16)
        self.assertTrue(torch.equal(w.allreduce(t), torch.arange(
            4, dtype=torch.bfloat16)))
        self.assertIsNone(w.barrier())
        r = w.iallreduce(x)
        self.assertTrue(r.test())
        self.assertIs(r.wait(), x)
        self.assertIsNone(w.split(mccl.UNDEFINED))
        self.assertEqual(w.split(3).size, 1)

    def test_gather_scatter_v_and_objects(self):
        w = self.w
        x = numpy.arange(3, dtype=numpy.int32)
        self.assertEqual(w.gather(x).tolist(), [[0, 1, 2]])
        out = numpy.zeros(3, dtype=numpy.int32)
        self.assertIs(w.scatter(x, out), out)
        self.assertEqual(out.tolist(), [0, 1, 2])
        self.assertEqual(w.allgatherv(x, [3]).tolist(), [0, 1, 2])
        o = numpy.zeros(5, dtype=numpy.int32)
        w.alltoallv(x, [2], o, [2], [1], [3])
        self.assertEqual(o.tolist(), [0, 0, 0, 1, 2])
        self.assertRaises(ValueError, w.allgatherv, x, [2])
        self.assertEqual(w.bcast_obj({"a": 1}), {"a": 1})
        self.assertEqual(w.allgather_obj(("x",)), [("x",)])
        self.assertEqual(w.gather_obj(7), [7])
        self.assertEqual(w.scatter_obj([[1, 2]]), [1, 2])
        self.assertEqual(mccl.get_metrics()["state"], "alone")

    def test_point_to_point_has_no_peer(self):
        with self.assertRaises(mccl.InvalidArgumentError) as cm:
            self.w.send(numpy.zeros(2), 0)
        self.assertIn("no one to talk to", str(cm.exception))

    def test_argument_errors(self):
        w = self.w
        with self.assertRaisesRegex(ValueError, "not contiguous"):
            w.allreduce(numpy.zeros((3, 3))[:, 0])
        with self.assertRaisesRegex(ValueError, "not contiguous"):
            w.allreduce(torch.zeros(3, 3).t())
        with self.assertRaisesRegex(TypeError, "not one of mccl's"):
            w.allreduce(numpy.zeros(2, dtype=numpy.complex128))
        with self.assertRaisesRegex(TypeError, "not one of mccl's"):
            w.allreduce(torch.zeros(2, dtype=torch.complex64))
        with self.assertRaisesRegex(TypeError, "not a buffer"):
            w.allreduce("text")
        with self.assertRaisesRegex(ValueError, "read-only"):
            w.allreduce(b"abc")
        with self.assertRaisesRegex(ValueError, "read-only"):
            a = numpy.zeros(2)
            a.flags.writeable = False
            w.broadcast(a)
        with self.assertRaisesRegex(ValueError, "holds 3 elements, 2"):
            w.allreduce(numpy.zeros(2), out=numpy.zeros(3))
        with self.assertRaisesRegex(ValueError, "op 8"):
            w.allreduce(numpy.zeros(2), op=8)
        # an op by its name, as torch's ReduceOp reads
        x = numpy.full(3, 2.0)
        self.assertEqual(list(w.allreduce(x, op="avg")), [2.0] * 3)
        self.assertEqual(list(w.allreduce(x, op="MAX")), [2.0] * 3)
        with self.assertRaisesRegex(ValueError, "op 'mean' .*their names"):
            w.allreduce(numpy.zeros(2), op="mean")
        with self.assertRaisesRegex(mccl.UnsupportedError, "floating"):
            w.allreduce(numpy.zeros(2, dtype=numpy.int32), op="avg")
        with self.assertRaisesRegex(mccl.UnsupportedError, "integer dtype"):
            w.allreduce(numpy.zeros(2), op=mccl.BXOR)
        with self.assertRaisesRegex(mccl.UnsupportedError, "floating"):
            w.allreduce(numpy.zeros(2, dtype=numpy.int32), op=mccl.AVG)
        with self.assertRaisesRegex(ValueError, "root 1 is out of range"):
            w.reduce(numpy.zeros(2), root=1)
        with self.assertRaisesRegex(ValueError, "not a whole number"):
            w.allreduce(bytearray(3), dtype="float16")
        with self.assertRaisesRegex(TypeError, "CPU and CUDA tensors"):
            w.allreduce(torch.zeros(2, device="meta"))
        if not torch.cuda.is_available():
            class OnGPU:
                __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4",
                                            "data": (0, False), "version": 3}
            with self.assertRaisesRegex(TypeError, "sees no CUDA device"):
                w.allreduce(OnGPU())

    def test_buffers(self):
        b = _buffers.view(bytearray(8), "b")
        self.assertEqual((b.count, b.dtype), (8, mccl.uint8))
        b = _buffers.view(array.array("i", [1, 2, 3]), "b")
        self.assertEqual((b.count, b.dtype), (3, mccl.int32))
        b = _buffers.view(numpy.zeros(6, dtype=numpy.uint16), "b",
                          dtype="bfloat16")
        self.assertEqual((b.count, b.dtype), (6, mccl.bfloat16))
        b = _buffers.view(torch.zeros(3, dtype=torch.float16), "b")
        self.assertEqual((b.count, b.dtype, b.nbytes), (3, mccl.float16, 6))
        self.assertEqual(_buffers.dtype_code(torch.float64), mccl.float64)
        self.assertEqual(_buffers.dtype_code(numpy.dtype("int64")),
                         mccl.int64)
        with self.assertRaisesRegex(TypeError, "unknown dtype"):
            _buffers.dtype_code("float128")

    def test_errors_are_classes_by_code(self):
        codes = {c.code: c for c in mccl._ERRORS.values()}
        self.assertEqual(sorted(codes), list(range(1, 11)))
        for code, cls in codes.items():
            self.assertTrue(issubclass(cls, mccl.Error))
            e = cls("why", code)
            self.assertEqual(e.code, code)
            self.assertEqual(str(e), "%s: why" % cls.name)
        self.assertTrue(issubclass(mccl.TimeoutError, TimeoutError))
        self.assertTrue(issubclass(mccl.InvalidArgumentError, ValueError))
        self.assertTrue(issubclass(mccl.ConnectError, ConnectionError))
        self.assertTrue(issubclass(mccl.PermissionError, PermissionError))

    def test_empty(self):
        e = mccl.empty((2, 3), "int32")
        self.assertEqual((e.shape, str(e.dtype)), ((2, 3), "int32"))
        t = mccl.empty(5, "bfloat16")
        self.assertEqual((tuple(t.shape), t.dtype), ((5,), torch.bfloat16))
        with self.assertRaisesRegex(ValueError, "bad shape"):
            mccl.empty((2, -1))

    def test_init_arguments(self):
        with self.assertRaisesRegex(ValueError, "together"):
            mccl._make_world("j", None, 2)

    def test_no_library_needed(self):
        self.assertIsNone(mccl._lib._lib)
        self.assertTrue(os.environ.get("MCCL_LIBRARY", "").startswith(
            "/nonexistent"))


if __name__ == "__main__":
    unittest.main()
