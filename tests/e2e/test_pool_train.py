"""Training on the pool (issue 38): a coordinator, CPU workers and `pool submit ... train` with a real
script (linear regression in NumPy, tests/e2e/train/linear_train.py) run in the workers' sandboxes."""

import json
import os
import signal
import subprocess
import time
import unittest

from harness import READY_DEADLINE, free_port
from test_pool import PoolBase

HERE = os.path.dirname(os.path.abspath(__file__))
DEBIAN_PYTHON = "/usr/bin/python3"  # the workers' sandbox runs it too: NumPy from python3-numpy


def has_numpy():
    return subprocess.run([DEBIAN_PYTHON, "-c", "import numpy"], capture_output=True).returncode == 0


@unittest.skipUnless(has_numpy(), "needs Debian's python3-numpy (scripts/install-deps)")
class PoolTrainTest(PoolBase):
    def make_training(self, samples=600):
        root = os.path.join(self.tmp, "training")
        subprocess.run([DEBIAN_PYTHON, os.path.join(HERE, "train", "fixture.py"), "make", root, str(samples)], check=True)
        return root

    def distance(self, weights):
        out = subprocess.run([DEBIAN_PYTHON, os.path.join(HERE, "train", "fixture.py"), "error", weights],
                             check=True, capture_output=True, text=True)
        return float(out.stdout)

    def train(self, home, root, *extra, timeout=300):
        out = os.path.join(self.tmp, "run-" + os.path.basename(home))
        cp = self.run_cli(home, "pool", "submit", self.ready["submit"], "train",
                          "--script", os.path.join(root, "script", "linear_train.py"),
                          "--init", os.path.join(root, "init.safetensors"), "--data", os.path.join(root, "data"),
                          "--budget", "20", "--out", out, *extra, timeout=timeout)
        return cp, [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")], out

    def test_rounds_are_averaged_paid_and_the_loss_goes_down(self):
        self.start_pool()
        for name in ("w1", "w2", "w3"):
            self.start_worker(name, trusted=True)
        root, alice = self.make_training(), self.user("alice")
        cp, lines, out = self.train(alice, root, "--workers", "3", "--rounds", "4", "--local-steps", "10",
                                    "--wait", "--json")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        rounds = [l for l in lines if l["event"] == "round"]
        self.assertEqual([r["round"] for r in rounds], [0, 1, 2, 3])
        self.assertTrue(all(r["updates"] == 3 and r["rejected"] == 0 for r in rounds), rounds)
        losses = [r["loss"] for r in rounds]
        self.assertLess(losses[-1], losses[0] / 4, losses)
        done = lines[-1]
        self.assertEqual((done["event"], done["state"], done["rounds_done"]), ("done", "done", 4))
        # The weights came back, nearer the model the data was made from (they started 4.3 away).
        self.assertLess(self.distance(os.path.join(out, "weights.safetensors")), 1.5)
        with open(os.path.join(out, "metrics.csv")) as f:
            self.assertEqual(len(f.read().splitlines()), 5)
        # Every update was paid from alice's budget, at the workers' price; the ledger balances.
        payments = [e for e in self.credits(alice)["entries"] if e["kind"] == "escrow"]
        self.assertTrue(payments)
        self.assertGreater(float(done["credits_spent"]), 0)
        self.audit_ok()

    def test_a_worker_returning_garbage_is_refused_unpaid_and_the_training_goes_on(self):
        self.start_pool()
        for name in ("w1", "w2"):
            self.start_worker(name, trusted=True)
        cheat = self.start_worker("cheat", env_extra={"RUNSNACK_POOL_FAULT": "flip-bits"})
        root, alice = self.make_training(), self.user("alice")
        cp, lines, out = self.train(alice, root, "--workers", "3", "--rounds", "3", "--local-steps", "10",
                                    "--wait", "--json")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        rounds = [l for l in lines if l["event"] == "round"]
        self.assertEqual(len(rounds), 3)
        self.assertGreater(sum(r["rejected"] for r in rounds), 0, rounds)  # the cheat's files were caught
        self.assertTrue(all(r["updates"] == 3 for r in rounds), rounds)     # its shards ran again elsewhere
        self.assertLess(self.distance(os.path.join(out, "weights.safetensors")), 2.5)  # from 4.3
        status = self.pool_status(alice)
        cheat_devices = [d for d in status["devices"] if d["invalid"] > 0]
        self.assertTrue(cheat_devices, status["devices"])
        self.assertTrue(all(d["tasks_done"] == 0 for d in cheat_devices), cheat_devices)  # never paid
        cheat.stop()
        self.audit_ok()

    def test_the_training_resumes_after_the_coordinator_restarts(self):
        listen = "127.0.0.1:%d" % free_port()
        self.start_pool(listen=listen)
        self.start_worker("w1", trusted=True)
        self.start_worker("w2", trusted=True)
        root, alice = self.make_training(), self.user("alice")
        cp, lines, _ = self.train(alice, root, "--workers", "2", "--rounds", "6", "--local-steps", "10", "--json")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        training = lines[0]["training"]
        # Killed outright once two rounds are in: nothing may be lost or run twice.
        self.poll_until(lambda: len(self.trainings(alice, training)["metrics"]) >= 2, 120, "two rounds")
        self.coord.signal(signal.SIGKILL)
        self.coord.wait(15)
        # Same home, database and port: the links still work.
        self.coord = self.start(self.chome, "pool", "serve", "--json", "--listen", listen, name="coordinator-again")
        self.coord.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready after restart")
        cp, lines, out = self.train(alice, root, "--resume", training, "--wait", "--json")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        rounds = [l["round"] for l in lines if l["event"] == "round"]
        self.assertEqual(rounds, list(range(6)))  # every round once, in order
        self.assertEqual(lines[-1]["state"], "done")
        self.assertLess(self.distance(os.path.join(out, "weights.safetensors")), 1.5)

    def trainings(self, home, training):
        """The training as `pool status --json` lists it (the owner's trainings)."""
        return next(t for t in self.pool_status(home)["trainings"] if t["training"] == training)

    def test_bad_input_is_refused_with_what_to_do(self):
        self.start_pool()
        root, alice = self.make_training(samples=2), self.user("alice")
        cp, _, _ = self.train(alice, root, "--workers", "3")
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn("2 records for 3 workers", cp.stderr)
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty)
        cp = self.run_cli(alice, "pool", "submit", self.ready["submit"], "train", "--script",
                          os.path.join(root, "script", "linear_train.py"), "--init", os.path.join(root, "init.safetensors"),
                          "--data", empty, "--workers", "1")
        self.assertIn("holds no files", cp.stderr)
        bad_init = os.path.join(self.tmp, "bad.safetensors")
        with open(bad_init, "wb") as f:
            f.write(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
        cp = self.run_cli(alice, "pool", "submit", self.ready["submit"], "train", "--script",
                          os.path.join(root, "script", "linear_train.py"), "--init", bad_init,
                          "--data", os.path.join(root, "data"), "--workers", "1")
        self.assertIn("--init", cp.stderr)
        self.assertNotEqual(cp.returncode, 0)


if __name__ == "__main__":
    unittest.main()
