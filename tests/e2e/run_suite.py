"""Runs unittest suites for one ctest entry: `python3 run_suite.py test_pool.PoolTest [...]`.

Like `python3 -m unittest -v`, except that a run in which every test was skipped (no root, no
PostgreSQL, no tmux, ...) exits 77, ctest's SKIP_RETURN_CODE, so that ctest reports it as skipped
rather than passed. A run with some tests skipped and the rest passing exits 0.

`--without NAME` (repeatable) leaves out the tests whose id is NAME or starts with NAME + "." (a class or
a test of the named suites, e.g. `test_run --without test_run.Sync`): one file's classes split over
several ctest entries that ctest -j runs side by side, while a class added later still runs in the
entry that names the file. A NAME that matches no test exits 2, so a rename cannot drop a split.
"""
import os
import sys
import unittest

SKIPPED = 77


def tests_of(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from tests_of(item)
        else:
            yield item


def main(argv):
    names, without = [], []
    args = iter(argv)
    for arg in args:
        if arg == "--without":
            without.append(next(args, ""))
        else:
            names.append(arg)
    if not names or "" in without:
        print(__doc__)
        return 2
    sys.path.insert(0, os.getcwd())  # as `python3 -m unittest` does: the suites sit in the working directory
    tests = list(tests_of(unittest.defaultTestLoader.loadTestsFromNames(names)))
    for name in without:
        kept = [t for t in tests if not (t.id() == name or t.id().startswith(name + "."))]
        if len(kept) == len(tests):
            print("run_suite: --without %s matches no test of %s" % (name, " ".join(names)), file=sys.stderr)
            return 2
        tests = kept
    result = unittest.TextTestRunner(verbosity=2).run(unittest.TestSuite(tests))
    if not result.wasSuccessful():
        return 1
    if result.testsRun and len(result.skipped) == result.testsRun:
        print(f"run_suite: all {result.testsRun} tests skipped: reported to ctest as skipped", file=sys.stderr)
        return SKIPPED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
