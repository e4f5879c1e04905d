"""expecttest, as much of it as torch's test helpers need to import
(torch.testing._internal.common_utils subclasses expecttest.TestCase).
The package is in neither Debian 12 nor the 16-core machine's image, and
the distributed tests that tests/python/torch_suite.py runs never call
assertExpectedInline; a test that did would compare plainly."""

import unittest

ACCEPT = False		# common_utils reads it: never rewrite expectations


class TestCase(unittest.TestCase):
    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertEqual(actual, expect)
