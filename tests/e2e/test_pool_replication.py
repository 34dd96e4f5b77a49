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

    def start_cheater(self):
        """A worker that flips bits in its results (RUNSNACK_POOL_FAULT=flip-bits), registered."""
        home = self.new_home("cheater")
        proc = self.start(home, "pool", "join", self.ready["join"], "--cpu", name="cheater",
                          env_extra={"RUNSNACK_POOL_FAULT": "flip-bits"})
        proc.wait_for(lambda e: e.get("event") == "registered", READY_DEADLINE, "registration of the cheater")
        return home, proc

    def run_job(self, user, shards, *flags, out_name="out"):
        """Submits COMMAND over `shards` shards and waits: the job must end done with every output right."""
        out = os.path.join(self.tmp, out_name)
        cp, lines = self.submit(user, "--shards", str(shards), *flags, "--budget", "10", "--out", out, *COMMAND)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        done = lines[-1]
        self.assertEqual(done["state"], "done", done)
        self.check_outputs(out, shards)
        return done

    def pool_status(self, user):
        cp = self.ok(user, "pool", "status", self.ready["submit"], "--json")
        return json.loads(cp.stdout.strip().splitlines()[-1])

    def test_cheaters_results_are_outvoted_and_the_output_is_right(self):
        self.start_pool("--starting-credits", "100")
        cheater_home, cheater = self.start_cheater()
        self.start_worker("honest1")
        self.start_worker("honest2")
        user = self.new_home("user")
        shards = 6
        done = self.run_job(user, shards, "--replicas", "2")
        v = done["verification"]
        self.assertEqual((v["method"], v["replicas"], v["compare"]), ("replication", 2, "bit-for-bit"), v)
        self.assertGreaterEqual(v["copies"], shards)  # one copy per shard, more for disagreements
        self.assertGreater(v["cost_fraction"], 0.99)
        # An unproven device that got a check wrong gets hidden known-answer tasks (the shards decided
        # here) until it is excluded: wait for that, so that no result of it is still on its way.
        self.coord.wait_for(lambda e: e.get("event") == "device_excluded", 60, "the cheater's exclusion")
        self.assertEqual(cheater.wait(60), 1, cheater.stderr())
        # The cheater's results (held for a quorum, refused when the shard was decided, or wrong
        # answers to known-answer tasks) were each a failed check, none is paid.
        cheater_results = [e for e in cheater.events() if e.get("event", "").startswith("result_")]
        self.assertEqual([e for e in cheater_results if e["event"] == "result_accepted"], [])
        paid = [e for e in self.credits(cheater_home)["entries"] if e["kind"] == "payment"]
        self.assertEqual(paid, [], "the cheater must not be paid")
        status = self.pool_status(user)
        me = [d for d in status["devices"] if d["id"].startswith(self.peer_id(cheater_home))]
        self.assertEqual(len(me), 1)
        self.assertEqual(me[0]["valid"], 0)
        self.assertEqual(me[0]["invalid"], len(cheater_results))
        self.assertEqual(v["rejected"], me[0]["invalid"])
        # Every worker connects from 127.0.0.1: one network, so each quorum fell back to copies on
        # different PeerIds of that network, and the job says so.
        self.assertEqual(v["networks"], 1, v)
        self.assertEqual({d["network"] for d in status["devices"] if d["online"]}, {"127.0.0.0/24"})
        self.assertTrue(any(e.get("event") == "quorum_not_network_diverse" for e in self.coord.events()))
        self.audit_ok()

    def test_cheater_working_alone_first_is_outvoted_and_excluded(self):
        # Deterministic: the cheater takes every first copy; each of its results disagrees with the
        # honest copies that follow, is refused, and the third excludes it.
        self.start_pool("--starting-credits", "100")
        cheater_home, cheater = self.start_cheater()
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

    def test_cheater_is_caught_by_known_answers_without_replicas(self):
        self.start_pool("--starting-credits", "100")
        self.start_worker("honest1")
        self.start_worker("honest2")
        user = self.new_home("user")
        # A replicated job first: the shards its quorums decide are the answers the pool knows.
        first = self.run_job(user, 4, "--replicas", "2", out_name="first")

        def first_job_status():
            return [j for j in self.pool_status(user)["jobs"] if j["job"] == first["job"]][0]
        before = first_job_status()
        cheater_home, cheater = self.start_cheater()
        # No --replicas, no --spot-check: only the hidden known-answer tasks check the new device.
        self.run_job(user, 6)  # right outputs: the cheater never ran one of its tasks
        excluded = self.coord.wait_for(lambda e: e.get("event") == "device_excluded", 60, "exclusion")
        self.assertEqual(excluded["peer"], self.peer_id(cheater_home))
        checked = [e for e in self.coord.events() if e.get("event") == "known_answer_checked"]
        mine = [e for e in checked if e["peer"] == self.peer_id(cheater_home)]
        self.assertEqual(len(mine), 3, checked)  # the pool excludes after 3 wrong results
        self.assertFalse(any(e["valid"] for e in mine))
        # Each was a task of the first job, issued again: what the cheater saw was a real task.
        first_job = first["job"]
        for e in mine:
            self.assertTrue(e["task"].startswith(first_job + "."), e)
        paid = [e for e in self.credits(cheater_home)["entries"] if e["kind"] == "payment"]
        self.assertEqual(paid, [], "the cheater must not be paid")
        status = self.pool_status(user)
        me = [d for d in status["devices"] if d["id"].startswith(self.peer_id(cheater_home))]
        self.assertEqual((me[0]["valid"], me[0]["invalid"]), (0, 3), me)
        self.assertIsNotNone(me[0]["excluded"])
        # The known-answer checks count on the job whose tasks they re-ran, and nothing was merged twice.
        again = first_job_status()
        self.assertEqual(again["verification"]["rejected"], before["verification"]["rejected"] + 3, again)
        self.assertEqual(again["verification"]["checked"], before["verification"]["checked"] + 3, again)
        self.assertEqual((again["done"], again["credits_spent"]), (before["done"], before["credits_spent"]))
        refused = [e for e in self.audit(self.chome) if e["kind"] == "pool_result" and e["decision"] == "refuse"]
        self.assertEqual(len(refused), 3, refused)
        self.audit_ok()

    def test_spot_checks_of_an_honest_pool_and_bad_flags(self):
        self.start_pool("--starting-credits", "100")
        self.start_worker("w1")
        self.start_worker("w2")
        user = self.new_home("user")
        v = self.run_job(user, 8, "--spot-check", "0.25")["verification"]
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



class DeadEndTest(PoolBase):
    """A job that cannot complete fails, saying why, instead of waiting forever (CI once saw a replicated job
    wait past its 240 s limit)."""

    def test_a_quorum_no_online_worker_may_complete_fails_the_job_with_the_reason(self):
        # One worker, --replicas 2: every copy avoids the peer that ran the shard, the only one online.
        self.start_pool("--starting-credits", "100", "--give-up-after", "3")
        self.start_worker("alone")
        user = self.new_home("user")
        cp, lines = self.submit(user, "--shards", "2", "--replicas", "2", "--budget", "10", *COMMAND, timeout=120)
        self.assertNotEqual(cp.returncode, 0, cp.stdout)
        done = lines[-1]
        self.assertEqual(done["state"], "failed", done)
        self.assertIn("cannot complete", done["reason"])
        self.assertIn("no online worker may run task", done["reason"])
        stuck = self.coord.wait_for(lambda e: e.get("event") == "job_stuck", 10, "the job_stuck event")
        self.assertEqual(stuck["job"], done["job"])
        # The escrow came back to the submitter: nothing is paid for shards no quorum decided.
        self.assertEqual(self.credits(user)["balance"], "100", self.credits(user))
        self.audit_ok()

    def test_a_worker_that_joins_in_time_completes_the_job(self):
        # The same job while the second worker is on its way: stuck for a moment is not given up.
        self.start_pool("--starting-credits", "100", "--give-up-after", "30")
        self.start_worker("first")
        user = self.new_home("user")
        out = os.path.join(self.tmp, "out")
        sub = self.start(user, "pool", "submit", self.ready["submit"], "exec", "--wait", "--json", "--out", out,
                         "--shards", "2", "--replicas", "2", "--budget", "10", *COMMAND, name="submit")
        self.coord.wait_for(lambda e: e.get("event") == "copies_made", 60, "copies")
        self.start_worker("second")
        done = sub.wait_for(lambda e: e.get("event") == "done", 120, "the job")
        self.assertEqual(done["state"], "done", done)
        for i in range(2):
            with open(os.path.join(out, "shard-%d" % i, "r%d.txt" % i)) as f:
                self.assertEqual(f.read(), "shard %d of 2\n" % i)
        self.assertFalse(any(e.get("event") == "job_stuck" for e in self.coord.events()))


if __name__ == "__main__":
    unittest.main()
