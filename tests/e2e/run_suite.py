"""Runs unittest suites for one ctest entry: `python3 run_suite.py test_pool.PoolTest [...]`.

Like `python3 -m unittest -v`, except that a run in which every test was skipped (no root, no
PostgreSQL, no tmux, ...) exits 77, ctest's SKIP_RETURN_CODE, so that ctest reports it as skipped
rather than passed. A run with some tests skipped and the rest passing exits 0.
"""
import os
import sys
import unittest

SKIPPED = 77


def main(names):
    if not names:
        print(__doc__)
        return 2
    sys.path.insert(0, os.getcwd())  # as `python3 -m unittest` does: the suites sit in the working directory
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    if result.testsRun and len(result.skipped) == result.testsRun:
        print(f"run_suite: all {result.testsRun} tests skipped: reported to ctest as skipped", file=sys.stderr)
        return SKIPPED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
