"""checklib.py: the one way the Python test scripts report (dist_check.py,
torch_check.py): a line "ok NAME" or "FAIL NAME: why" per check, and the
count of failures for the exit status."""

import sys

failed = 0


def check(name, cond, why=""):
    global failed
    if cond:
        print("ok   %s" % name)
    else:
        failed += 1
        print("FAIL %s: %s" % (name, why))
    sys.stdout.flush()


def raises(name, cls, fn, text=""):
    """fn() must raise cls with text in its message; returns the error."""
    try:
        fn()
    except cls as e:
        check(name, text in str(e), "message %r lacks %r" % (str(e), text))
        return e
    except Exception as e:		# noqa: BLE001 (reported)
        check(name, False, "raised %s: %s" % (type(e).__name__, e))
        return None
    check(name, False, "no exception")
    return None
