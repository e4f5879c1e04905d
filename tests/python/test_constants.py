"""test_constants.py: the Python package's copies of mccl.h's constants
(result codes and their error classes, dtypes, ops, the special ranks and
tags) against the header itself, parsed here; and error classes named as
Python's built-ins are subclasses of them, so they never hide one."""

import builtins
import os
import re
import unittest

import mccl
from mccl import _buffers

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "libclient", "mccl.h")


def header():
    with open(HEADER) as f:
        return re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)


def enum(text, name):
    """The members of typedef enum {...} name, in order, with their
    values (C's rule: one more than the last unless given)."""
    body = re.search(r"typedef enum \{([^}]*)\}\s*%s;" % name, text).group(1)
    out, value = {}, -1
    for item in (i.strip() for i in body.split(",")):
        if not item:
            continue
        m = re.match(r"(\w+)(?:\s*=\s*(-?\d+))?$", item)
        value = int(m.group(2)) if m.group(2) else value + 1
        out[m.group(1)] = value
    return out


def define(text, name):
    return int(re.search(r"#define\s+%s\s+\(?(-?\d+)\)?" % name,
                         text).group(1))


class Constants(unittest.TestCase):
    def setUp(self):
        self.h = header()

    def test_result_codes_and_classes(self):
        codes = enum(self.h, "mccl_result_t")
        self.assertEqual(len(codes), define(self.h, "MCCL_NUM_RESULTS"))
        by_code = {c.code: c for c in mccl._ERRORS.values()}
        for name, value in codes.items():
            if value == 0:
                continue
            cls = by_code.get(value)
            self.assertIsNotNone(cls, "no error class for %s" % name)
            self.assertEqual(cls.name, name)
        self.assertEqual(set(by_code), set(codes.values()) - {0})

    def test_dtypes(self):
        dtypes = enum(self.h, "mccl_dtype_t")
        self.assertEqual(len(dtypes), define(self.h, "MCCL_NUM_DTYPES"))
        for name, value in dtypes.items():
            short = name[len("MCCL_"):].lower()
            self.assertEqual(_buffers.DTYPE_NAMES[value], short)
            self.assertEqual(getattr(mccl, short), value)

    def test_ops(self):
        ops = enum(self.h, "mccl_op_t")
        self.assertEqual(len(ops), define(self.h, "MCCL_NUM_OPS"))
        self.assertEqual(len(mccl.OP_NAMES), len(ops))
        for name, value in ops.items():
            short = name[len("MCCL_"):]
            self.assertEqual(getattr(mccl, short), value)
            self.assertEqual(mccl.OP_NAMES[value], short.lower())

    def test_special_values(self):
        for name in ("ANY_TAG", "ANY_SOURCE", "UNDEFINED"):
            self.assertEqual(getattr(mccl, name),
                             define(self.h, "MCCL_" + name))

    def test_no_builtin_hidden(self):
        for cls in mccl._ERRORS.values():
            same = getattr(builtins, cls.__name__, None)
            if same is not None and same is not cls:
                self.assertTrue(issubclass(cls, same), "mccl.%s is not a "
                                "builtins.%s" % (cls.__name__, cls.__name__))


if __name__ == "__main__":
    unittest.main()
