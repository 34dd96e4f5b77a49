"""runsnack pool: exec results verified by replication (--replicas) and spot checks (--spot-check)."""

import json
import os
import unittest

from harness import READY_DEADLINE
from test_pool import PoolBase

# Each shard writes a file the cheater (RUNSNACK_POOL_FAULT=flip-bits) corrupts.
COMMAND = ("--", "sh", "-c", "echo shard {shard} of {shards} > out/r{shard}.txt; echo {shard}")


class ReplicationTest(PoolBase):
    def check_outputs(self, out, shards):
        for i in range(shards):
            with open(os.path.join(out, "shard-%d" % i, "r%d.txt" % i)) as f:
                self.assertEqual(f.read(), "shard %d of %d\n" % (i, shards))

    def test_cheaters_results_are_outvoted_and_the_output_is_right(self):
        self.start_pool("--starting-credits", "100")
        cheater_home = self.new_home("cheater")
        cheater = self.start(cheater_home, "pool", "join", self.ready["join"], "--cpu", name="cheater",
                             env_extra={"RUNSNACK_POOL_FAULT": "flip-bits"})
        cheater.wait_for(lambda e: e.get("event") == "registered", READY_DEADLINE, "registration of the cheater")
        self.start_worker("honest1")
        self.start_worker("honest2")
        user = self.new_home("user")
        out = os.path.join(self.tmp, "out")
        shards = 6
        cp, lines = self.submit(user, "--shards", str(shards), "--replicas", "2", "--budget", "10", "--out", out,
                                *COMMAND)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        done = lines[-1]
        self.assertEqual(done["state"], "done", done)
        self.check_outputs(out, shards)
        v = done["verification"]
        self.assertEqual((v["method"], v["replicas"], v["compare"]), ("replication", 2, "bit-for-bit"), v)
        self.assertGreaterEqual(v["copies"], shards)  # one copy per shard, more for disagreements
        self.assertGreater(v["cost_fraction"], 0.99)
        # The cheater's results (held for a quorum, or refused when the shard was decided) lost
        # every quorum: each is a failed check, none is paid.
        cheater_results = [e for e in cheater.events() if e.get("event", "").startswith("result_")]
        self.assertEqual([e for e in cheater_results if e["event"] == "result_accepted"], [])
        paid = [e for e in self.credits(cheater_home)["entries"] if e["kind"] == "payment"]
        self.assertEqual(paid, [], "the cheater must not be paid")
        status = json.loads(self.ok(user, "pool", "status", self.ready["submit"], "--json").stdout.strip().splitlines()[-1])
        me = [d for d in status["devices"] if d["id"].startswith(self.peer_id(cheater_home))]
        self.assertEqual(len(me), 1)
        self.assertEqual(me[0]["valid"], 0)
        self.assertEqual(me[0]["invalid"], len(cheater_results))
        self.assertEqual(v["rejected"], me[0]["invalid"])
        self.audit_ok()

    def test_cheater_working_alone_first_is_outvoted_and_excluded(self):
        # Deterministic: the cheater takes every first copy; each of its results disagrees with the
        # honest copies that follow, is refused, and the third excludes it.
        self.start_pool("--starting-credits", "100")
        cheater_home = self.new_home("cheater")
        cheater = self.start(cheater_home, "pool", "join", self.ready["join"], "--cpu", name="cheater",
                             env_extra={"RUNSNACK_POOL_FAULT": "flip-bits"})
        cheater.wait_for(lambda e: e.get("event") == "registered", READY_DEADLINE, "registration of the cheater")
        user = self.new_home("user")
        out = os.path.join(self.tmp, "out")
        shards = 3
        sub = self.start(user, "pool", "submit", self.ready["submit"], "exec", "--wait", "--json", "--out", out,
                         "--shards", str(shards), "--replicas", "2", "--budget", "10", *COMMAND, name="submit")
        held = [cheater.wait_for(lambda e: e.get("event") == "result_held", 60, "held results") for _ in range(1)]
        self.assertTrue(held)
        self.start_worker("honest1")
        self.start_worker("honest2")
        done = sub.wait_for(lambda e: e.get("event") == "done", 120, "the job")
        self.assertEqual(done["state"], "done", done)
        self.check_outputs(out, shards)
        excluded = self.coord.wait_for(lambda e: e.get("event") == "device_excluded", 30, "exclusion")
        self.assertEqual(excluded["peer"], self.peer_id(cheater_home))
        self.assertGreaterEqual(done["verification"]["rejected"], 3)
        paid = [e for e in self.credits(cheater_home)["entries"] if e["kind"] == "payment"]
        self.assertEqual(paid, [], "the cheater must not be paid")
        self.audit_ok()

    def test_spot_checks_of_an_honest_pool_and_bad_flags(self):
        self.start_pool("--starting-credits", "100")
        self.start_worker("w1")
        self.start_worker("w2")
        user = self.new_home("user")
        out = os.path.join(self.tmp, "out")
        shards = 8
        cp, lines = self.submit(user, "--shards", str(shards), "--spot-check", "0.25", "--budget", "10", "--out", out,
                                *COMMAND)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        done = lines[-1]
        self.assertEqual(done["state"], "done", done)
        self.check_outputs(out, shards)
        v = done["verification"]
        self.assertEqual((v["method"], v["fraction"], v["rejected"]), ("spot-check", 0.25, 0), v)
        # New devices are unproven: their first results are all re-run elsewhere.
        self.assertGreaterEqual(v["copies"], 2)
        self.assertEqual(v["checked"], 2 * v["copies"])
        self.audit_ok()
        for flags, why in ((("--replicas", "0"), "replicas"), (("--spot-check", "2"), "spot-check"),
                           (("--replicas", "2", "--spot-check", "0.1"), "not both")):
            cp = self.run_cli(user, "pool", "submit", self.ready["submit"], "exec", "--shards", "1", *flags, "--", "true")
            self.assertNotEqual(cp.returncode, 0)
            self.assertIn(why, cp.stderr)


if __name__ == "__main__":
    unittest.main()
