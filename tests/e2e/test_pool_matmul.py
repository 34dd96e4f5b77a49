"""pool matmul end to end: tiles on CPU workers, Freivalds' check on the coordinator, C.npy for the user."""

import json
import os
import random
import struct
import unittest

from harness import READY_DEADLINE
from test_pool import PoolBase


def write_npy(path, rows, cols, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%df" % (rows * cols), *values))


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY"
    hlen = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + hlen].decode()
    shape = header[header.index("(") + 1:header.index(")")].split(",")
    rows, cols = int(shape[0]), int(shape[1])
    values = struct.unpack("<%df" % (rows * cols), data[10 + hlen:])
    return rows, cols, values


class PoolMatmulTest(PoolBase):
    def matmul(self, home, *args, timeout=240):
        out = os.path.join(self.tmp, "out-" + os.path.basename(home))
        cp = self.run_cli(home, "pool", "submit", self.ready["submit"], "matmul", "--wait", "--json", "--out", out,
                          *args, timeout=timeout)
        lines = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]
        return cp, lines, out

    def files(self, m, k, p):
        rnd = random.Random(7)
        a = [rnd.uniform(-1, 1) for _ in range(m * k)]
        b = [rnd.uniform(-1, 1) for _ in range(k * p)]
        write_npy(os.path.join(self.tmp, "A.npy"), m, k, a)
        write_npy(os.path.join(self.tmp, "B.npy"), k, p, b)
        # What numpy would read back: float32 values.
        a = struct.unpack("<%df" % (m * k), struct.pack("<%df" % (m * k), *a))
        b = struct.unpack("<%df" % (k * p), struct.pack("<%df" % (k * p), *b))
        return a, b

    def check_product(self, out, a, b, m, k, p):
        rows, cols, c = read_npy(os.path.join(out, "C.npy"))
        self.assertEqual((rows, cols), (m, p))
        for i in range(m):
            for j in range(p):
                want = sum(a[i * k + t] * b[t * p + j] for t in range(k))
                self.assertAlmostEqual(c[i * p + j], want, delta=1e-3, msg="C[%d,%d]" % (i, j))

    def test_product_of_files_is_correct_and_every_tile_checked(self):
        self.start_pool()
        self.start_worker("w1")
        self.start_worker("w2")
        m, k, p = 70, 50, 45  # tiles of 32 with ragged edges
        a, b = self.files(m, k, p)
        user = self.user()
        cp, lines, out = self.matmul(user, "--a", os.path.join(self.tmp, "A.npy"), "--b",
                                     os.path.join(self.tmp, "B.npy"), "--block", "32", "--rounds", "12", "--budget", "5")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        done = lines[-1]
        self.assertEqual(done["state"], "done", done)
        self.assertEqual(done["tasks"], 3 * 2)
        v = done["verification"]
        self.assertEqual((v["method"], v["rounds"], v["checked"], v["rejected"]), ("freivalds", 12, 6, 0), v)
        self.assertIn("cost_fraction", v)
        self.check_product(out, a, b, m, k, p)
        self.audit_ok()

    def test_cheater_is_caught_and_not_paid_and_the_product_is_right(self):
        self.start_pool()
        cheater_home = self.new_home("cheater")
        cheater = self.start(cheater_home, "pool", "join", self.ready["join"], "--cpu", name="cheater",
                             env_extra={"RUNSNACK_POOL_FAULT": "flip-bits"})
        cheater.wait_for(lambda e: e.get("event") == "registered", READY_DEADLINE, "registration of the cheater")
        m = k = p = 64
        a, b = self.files(m, k, p)
        user = self.user()
        out = os.path.join(self.tmp, "out-user")
        # The cheater is alone at first: every tile it returns is checked and refused, and the
        # third wrong one excludes it. Then an honest worker does the job.
        sub = self.start(user, "pool", "submit", self.ready["submit"], "matmul", "--wait", "--json", "--out", out,
                         "--a", os.path.join(self.tmp, "A.npy"), "--b", os.path.join(self.tmp, "B.npy"),
                         "--block", "16", "--budget", "5", name="submit")
        excluded = self.coord.wait_for(lambda e: e.get("event") == "device_excluded", 60, "exclusion")
        self.assertEqual(excluded["peer"], self.peer_id(cheater_home))
        self.assertEqual(cheater.wait(30), 1)
        self.assertIn("excluded", cheater.stderr())
        self.start_worker("honest")
        done = sub.wait_for(lambda e: e.get("event") == "done", 120, "the job")
        self.assertEqual(done["state"], "done", done)
        refused = [e for e in cheater.events() if e.get("event") == "result_refused"]
        accepted = [e for e in cheater.events() if e.get("event") == "result_accepted"]
        self.assertGreaterEqual(len(refused), 3)
        self.assertEqual(accepted, [], "no wrong tile may be accepted")
        self.assertIn("Freivalds", refused[0]["why"])
        self.assertGreaterEqual(done["verification"]["rejected"], 3)
        self.check_product(out, a, b, m, k, p)
        paid = [e for e in self.credits(cheater_home)["entries"] if e["kind"] == "payment"]
        self.assertEqual(paid, [], "the cheater must not be paid")
        status = json.loads(self.ok(user, "pool", "status", self.ready["submit"], "--json").stdout.strip().splitlines()[-1])
        bad = [d for d in status["devices"] if d["excluded"]]
        self.assertEqual(len(bad), 1)
        self.assertGreaterEqual(bad[0]["invalid"], 3)
        self.assertEqual(bad[0]["valid"], 0)
        self.audit_ok()

    def test_seeded_product_matches_a_second_run(self):
        # Same seed, different tiling: the same C, so the seed fully defines A and B.
        self.start_pool()
        self.start_worker("w1")
        user = self.user()
        cp1, l1, out1 = self.matmul(user, "--n", "96", "--block", "48", "--seed", "5", "--budget", "5")
        self.assertEqual(cp1.returncode, 0, cp1.stderr)
        user2 = self.user("user2")
        cp2, l2, out2 = self.matmul(user2, "--n", "96", "--block", "32", "--seed", "5", "--budget", "5")
        self.assertEqual(cp2.returncode, 0, cp2.stderr)
        _, _, c1 = read_npy(os.path.join(out1, "C.npy"))
        _, _, c2 = read_npy(os.path.join(out2, "C.npy"))
        self.assertEqual(len(c1), 96 * 96)
        for x, y in zip(c1, c2):
            self.assertAlmostEqual(x, y, delta=1e-4)
        self.assertEqual(l1[-1]["verification"]["checked"], 4)

    def test_bad_submissions_get_clear_errors(self):
        self.start_pool()
        user = self.user()
        write_npy(os.path.join(self.tmp, "A.npy"), 4, 3, [0.0] * 12)
        write_npy(os.path.join(self.tmp, "B.npy"), 4, 3, [0.0] * 12)
        line = self.fails(user, "pool", "submit", self.ready["submit"], "matmul", "--a", os.path.join(self.tmp, "A.npy"),
                          "--b", os.path.join(self.tmp, "B.npy"), contains="columns must equal")
        with open(os.path.join(self.tmp, "bad.npy"), "wb") as f:
            f.write(b"not numpy")
        self.fails(user, "pool", "submit", self.ready["submit"], "matmul", "--a", os.path.join(self.tmp, "bad.npy"),
                   "--b", os.path.join(self.tmp, "B.npy"), contains="not a .npy")
        self.fails(user, "pool", "submit", self.ready["submit"], "matmul", contains="--n")
        self.fails(user, "pool", "submit", self.ready["submit"], "matmul", "--n", "64", "--block", "4096",
                   contains="--block")
        self.fails(user, "pool", "submit", self.ready["submit"], "nosuch", contains="exec, matmul, render, noop")


if __name__ == "__main__":
    unittest.main()
