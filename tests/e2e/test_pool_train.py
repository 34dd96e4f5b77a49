"""Training on the pool (issue 38): a coordinator, CPU workers and `pool submit ... train` with a real
script (linear regression in NumPy, tests/e2e/train/linear_train.py) run in the workers' sandboxes."""

import json
import os
import re
import shutil
import signal
import subprocess
import time
import unittest

from harness import READY_DEADLINE, free_port
from pool_netns import NetnsMixin
from test_pool import PoolBase
from test_pool_pg import PostgresMixin

HERE = os.path.dirname(os.path.abspath(__file__))
DEBIAN_PYTHON = "/usr/bin/python3"  # the workers' sandbox runs it too: NumPy from python3-numpy


def has_numpy():
    return subprocess.run([DEBIAN_PYTHON, "-c", "import numpy"], capture_output=True).returncode == 0


class TrainBase(PoolBase):
    def make_training(self, samples=600):
        root = os.path.join(self.tmp, "training")
        subprocess.run([DEBIAN_PYTHON, os.path.join(HERE, "train", "fixture.py"), "make", root, str(samples)], check=True)
        return root

    def distance(self, weights):
        out = subprocess.run([DEBIAN_PYTHON, os.path.join(HERE, "train", "fixture.py"), "error", weights],
                             check=True, capture_output=True, text=True)
        return float(out.stdout)

    # On loopback every worker is on one network: no re-run could be independent (PoolTrainRerunTest has them).
    CHECK_FRACTION = "0"

    def train(self, home, root, *extra, timeout=300, script="linear_train.py"):
        out = os.path.join(self.tmp, "run-" + os.path.basename(home))
        if "--resume" not in extra:
            extra = ("--check-fraction", self.CHECK_FRACTION) + extra
        cp = self.run_cli(home, "pool", "submit", self.ready["submit"], "train",
                          "--script", os.path.join(root, "script", script),
                          "--init", os.path.join(root, "init.safetensors"), "--data", os.path.join(root, "data"),
                          "--budget", "20", "--out", out, *extra, timeout=timeout)
        return cp, [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")], out

    def trainings(self, home, training):
        """The training as `pool status --json` lists it (the owner's trainings)."""
        return next(t for t in self.pool_status(home)["trainings"] if t["training"] == training)


@unittest.skipUnless(has_numpy(), "needs Debian's python3-numpy (scripts/install-deps)")
class PoolTrainTest(TrainBase):
    def test_rounds_are_averaged_paid_and_the_loss_goes_down(self):
        self.start_pool()
        workers = [self.start_worker(name, trusted=True) for name in ("w1", "w2", "w3")]
        root, alice = self.make_training(samples=20000), self.user("alice")
        data_bytes = sum(os.path.getsize(os.path.join(root, "data", f)) for f in os.listdir(os.path.join(root, "data")))
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
        # A round moves weights, not the data again: each worker keeps the training's files by content.
        for w in workers:
            w.stop()
        join = re.search(r"/g/([a-z2-7]+)", self.ready["join"]).group(1)
        closed = lambda: [e["bytes_out"] for e in self.coord.events()
                          if e.get("event") == "session_closed" and e.get("grant") == join]
        sent = self.poll_until(lambda: closed() if len(closed()) == 3 else None, 30, "the workers' sessions to close")
        self.assertTrue(all(b < 1.5 * data_bytes for b in sent), (sent, data_bytes))  # 4 rounds: 4x without

    def test_a_worker_returning_garbage_is_refused_unpaid_and_the_training_goes_on(self):
        """A worker whose every update holds a NaN, alone first (so that it surely gets shards), then two
        honest ones: its updates are refused and unpaid, their shards run again on the honest ones."""
        self.start_pool()
        cheat = self.start_worker("cheat", env_extra={"RUNSNACK_POOL_FAULT": "poison-nan"})
        root, alice = self.make_training(), self.user("alice")
        out = os.path.join(self.tmp, "run-cheated")
        submit = self.start(alice, "pool", "submit", self.ready["submit"], "train", "--script",
                            os.path.join(root, "script", "linear_train.py"), "--init",
                            os.path.join(root, "init.safetensors"), "--data", os.path.join(root, "data"),
                            "--workers", "3", "--rounds", "3", "--local-steps", "10", "--budget", "20",
                            "--check-fraction", "0", "--wait", "--json", "--out", out, name="submit")
        cheat.wait_for(lambda e: e.get("event") == "result_refused", 60, "the cheat's first refused update")
        for name in ("w1", "w2"):
            self.start_worker(name, trusted=True)
        done = submit.wait_for(lambda e: e.get("event") == "done", 240, "the training")
        self.assertEqual(done["state"], "done", done)
        rounds = [e for e in submit.events() if e.get("event") == "round"]
        self.assertEqual(len(rounds), 3)
        self.assertGreater(sum(r["rejected"] for r in rounds), 0, rounds)  # the cheat's NaNs were caught
        self.assertTrue(all(r["updates"] == 3 for r in rounds), rounds)     # its shards ran again elsewhere
        self.assertLess(self.distance(os.path.join(out, "weights.safetensors")), 2.5)  # from 4.3
        refused = [e["why"] for e in cheat.events() if e.get("event") == "result_refused"]
        self.assertTrue(all("not finite" in why or "NaN" in why or "nan" in why for why in refused), refused)
        status = self.pool_status(alice)
        cheat_devices = [d for d in status["devices"] if d["invalid"] > 0]
        self.assertEqual(len(cheat_devices), 1, status["devices"])
        self.assertEqual(cheat_devices[0]["tasks_done"], 0, cheat_devices)  # never paid
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
        self.coord = self.start(self.chome, "pool", "serve", "--json", "--listen", listen, *self.db_args(),
                                name="coordinator-again")
        self.coord.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready after restart")
        cp, lines, out = self.train(alice, root, "--resume", training, "--wait", "--json")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        rounds = [l["round"] for l in lines if l["event"] == "round"]
        self.assertEqual(rounds, list(range(6)))  # every round once, in order
        self.assertEqual(lines[-1]["state"], "done")
        table = self.ok(alice, "pool", "jobs", self.ready["submit"]).stdout
        self.assertRegex(table, training + r" +done +6/6 ")
        self.assertLess(self.distance(os.path.join(out, "weights.safetensors")), 1.5)

    def test_a_hung_shard_does_not_hold_the_round(self):
        """One shard's script hangs in round 1: the round closes at its --round-timeout with the other
        updates, unpaid for the hung one, and the training goes on."""
        self.start_pool()
        workers = [self.start_worker(name, trusted=True) for name in ("w1", "w2", "w3")]
        root, alice = self.make_training(), self.user("alice")
        shutil.copy(os.path.join(HERE, "train", "hanging_train.py"), os.path.join(root, "script"))
        cp, lines, out = self.train(alice, root, "--workers", "3", "--rounds", "3", "--local-steps", "10",
                                    "--round-timeout", "10", "--wait", "--json", script="hanging_train.py")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        rounds = [l for l in lines if l["event"] == "round"]
        self.assertEqual([(r["updates"], r["closed_by_deadline"]) for r in rounds], [(3, False), (2, True), (3, False)])
        self.assertEqual(lines[-1]["state"], "done")
        # The worker of the hung shard is told at the deadline (its heartbeat's answer) and stops the script,
        # instead of running it to its own task timeout (on main it was never told).
        stopped = [e for w in workers for e in w.events() if e.get("event") == "task_stopped"]
        self.assertEqual(len(stopped), 1, stopped)
        self.assertIn("round deadline", stopped[0]["why"])
        self.audit_ok()

    def test_data_past_one_message_is_uploaded_in_chunks_and_each_worker_fetches_only_its_shard(self):
        """30 MB of data (a pool message holds 12 MiB): the submitter uploads it in chunks, each of
        two workers fetches its own shard's half in parts, and the rounds train on it."""
        self.start_pool()
        workers = [self.start_worker(name, trusted=True) for name in ("w1", "w2")]
        root, alice = self.make_training(samples=1_500_000), self.user("alice")
        data_bytes = sum(os.path.getsize(os.path.join(root, "data", f)) for f in os.listdir(os.path.join(root, "data")))
        self.assertGreater(data_bytes, 24 << 20)
        cp, lines, out = self.train(alice, root, "--workers", "2", "--rounds", "2", "--local-steps", "10",
                                    "--wait", "--json", timeout=600)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        uploaded = next(l for l in lines if l["event"] == "uploaded")
        self.assertGreaterEqual(uploaded["bytes"], data_bytes)
        rounds = [l for l in lines if l["event"] == "round"]
        self.assertEqual([(r["round"], r["updates"]) for r in rounds], [(0, 2), (1, 2)])
        self.assertEqual(lines[-1]["state"], "done")
        # Each worker got its half of the data once (and the weights), not all of it.
        join = re.search(r"/g/([a-z2-7]+)", self.ready["join"]).group(1)
        for w in workers:
            w.stop()
        closed = lambda: [e["bytes_out"] for e in self.coord.events()
                          if e.get("event") == "session_closed" and e.get("grant") == join]
        sent = self.poll_until(lambda: closed() if len(closed()) == 2 else None, 30, "the workers' sessions to close")
        self.assertTrue(all(0.4 * data_bytes < b < 0.7 * data_bytes for b in sent), (sent, data_bytes))
        # The data is dropped with the training's end: the same data again is uploaded again, whole.
        cp, lines, _ = self.train(alice, root, "--workers", "2", "--rounds", "1", "--local-steps", "1", "--json")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertGreaterEqual(next(l for l in lines if l["event"] == "uploaded")["bytes"], data_bytes)
        self.audit_ok()

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


@unittest.skipUnless(has_numpy(), "needs Debian's python3-numpy (scripts/install-deps)")
class PoolTrainPostgresTest(PostgresMixin, TrainBase):
    """The trainings table and its rounds on a PostgreSQL server of the test's own, across a restart."""
    test_the_training_resumes_after_the_coordinator_restarts = \
        PoolTrainTest.test_the_training_resumes_after_the_coordinator_restarts


@unittest.skipUnless(has_numpy(), "needs Debian's python3-numpy (scripts/install-deps)")
class PoolTrainRerunTest(NetnsMixin, TrainBase):
    """Updates re-run on a device of another network and compared (--check-fraction): each worker on a
    network of its own (pool_netns.py)."""
    CHECK_FRACTION = "0.1"

    def start_pool(self, *extra, **kw):
        kw.setdefault("listen", "0.0.0.0:0")  # reachable at every 127.0.N.1 of the namespace
        return super().start_pool(*extra, **kw)

    def test_poisoned_updates_are_rejected_unpaid_and_their_devices_excluded(self):
        """Issue 38: a worker returning its update x100, sign-flipped or random (of an honest size) under a
        valid signature. New devices have every update re-run elsewhere until proven; a re-run of the same
        shard, seed and weights must agree within 5% of the delta. The poisoners are alone first, so that
        each surely gets shards (with honest devices as fast, the scheduler may give one none), then the
        honest ones come."""
        self.start_pool()
        poisoners = {}
        for i, how in enumerate(("poison-scale", "poison-flip", "poison-random")):
            home = self.new_home(how)
            proc = self.start(home, "pool", "join", self.link_on(self.ready["join"], 3 + i), "--cpu", name=how,
                              env_extra={"RUNSNACK_POOL_FAULT": how})
            proc.wait_for(lambda e: e.get("event") == "registered", READY_DEADLINE, "registration of " + how)
            poisoners[how] = (home, proc)
        root, alice = self.make_training(), self.user("alice")
        out = os.path.join(self.tmp, "run-poisoned")
        submit = self.start(alice, "pool", "submit", self.ready["submit"], "train", "--script",
                            os.path.join(root, "script", "linear_train.py"), "--init",
                            os.path.join(root, "init.safetensors"), "--data", os.path.join(root, "data"),
                            "--workers", "6", "--rounds", "4", "--local-steps", "10", "--budget", "20",
                            "--check-fraction", self.CHECK_FRACTION, "--wait", "--json", "--out", out, name="submit")
        for how, (_, proc) in poisoners.items():
            proc.wait_for(lambda e: e.get("event") == "task_started", 120, "a first shard for " + how)
        for n in range(3):
            self.start_worker_on("honest%d" % n, n, trusted=True)
        done = submit.wait_for(lambda e: e.get("event") == "done", 600, "the training")
        self.assertEqual(done["state"], "done", done)
        rounds = [e for e in submit.events() if e.get("event") == "round"]
        self.assertEqual(len(rounds), 4)
        self.assertTrue(all(r["updates"] == 6 for r in rounds), rounds)  # every shard's update, from honest runs
        self.assertLess(self.distance(os.path.join(out, "weights.safetensors")), 1.5)
        status = self.pool_status(alice)
        for how, (home, _) in poisoners.items():
            mine = [d for d in status["devices"] if d["id"].startswith(self.peer_id(home))]
            self.assertEqual(len(mine), 1, how)
            # Caught, never paid: no accepted task and no credit earned.
            self.assertGreater(mine[0]["invalid"], 0, (how, mine[0]))
            self.assertEqual(mine[0]["tasks_done"], 0, (how, mine[0]))
            self.assertEqual(mine[0]["valid"], 0, (how, mine[0]))  # passing the screening proves nothing
            self.assertEqual(float(self.credits(home)["balance"]), 0.0, how)
        self.audit_ok()


if __name__ == "__main__":
    unittest.main()
