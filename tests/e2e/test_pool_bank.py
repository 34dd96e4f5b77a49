"""The pool's bank and verification against cheaters, Sybils and mistakes (issue 16), end to end:
real coordinators and workers, the fault-injecting worker modes (RUNSNACK_POOL_FAULT) and a hostile
worker speaking the wire protocol (tests/pool_hostile, $RUNSNACK_POOL_HOSTILE). The store-related
cases run again on PostgreSQL (test_pool_pg.PostgresMixin).
"""

import json
import os
import signal
import time
import unittest

import harness
from harness import READY_DEADLINE
from test_pool import PoolBase
from test_pool_pg import PostgresMixin

HOSTILE = os.environ.get("RUNSNACK_POOL_HOSTILE") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "dev", "tests", "pool_hostile", "pool_hostile_worker")
SCENE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "scenes", "spheres.json")
COMMAND = ("--", "sh", "-c", "echo shard {shard} of {shards} > out/r{shard}.txt; echo {shard}")


def credits_of(value):
    return float(value)


class BankBase(PoolBase):
    def start_hostile(self, mode, link, *extra, name="hostile"):
        """tests/pool_hostile's worker in a home of its own, tracked like the runsnack processes."""
        if not os.access(HOSTILE, os.X_OK):
            self.fail("the hostile worker is not built at %s (set RUNSNACK_POOL_HOSTILE)" % HOSTILE)
        home = self.new_home(name)
        saved = harness.BIN  # harness starts [harness.BIN] + args
        harness.BIN = HOSTILE
        try:
            return home, self.start(home, mode, link, *extra, name=name)
        finally:
            harness.BIN = saved

    def job_of(self, home, job):
        jobs = [j for j in self.pool_status(home)["jobs"] if j["job"] == job]
        self.assertEqual(len(jobs), 1)
        return jobs[0]

    def wait_job(self, home, job, deadline=180):
        end = time.monotonic() + deadline
        while True:
            st = self.job_of(home, job)
            if st["state"] != "running" or time.monotonic() > end:
                return st
            time.sleep(0.5)


class StoreCases:
    """Cases where the store is involved: run on SQLite here and on PostgreSQL in test_pool_pg."""

    # --- terms fixed when work is handed out ------------------------------------------------

    def test_bait_and_switch_is_paid_at_most_the_leased_price_for_the_time(self):
        self.start_pool()
        user = self.user(credits=100)
        cp = self.ok(user, "pool", "submit", self.ready["submit"], "exec", "--shards", "1", "--budget", "20", "--json",
                     "--", "echo", "real")
        job = json.loads(cp.stdout.strip().splitlines()[-1])["job"]
        started = time.monotonic()
        home, hostile = self.start_hostile("bait-switch", self.ready["join"])
        self.assertEqual(hostile.wait(120), 0, hostile.stderr())
        took_h = (time.monotonic() - started) / 3600
        answer = [e for e in hostile.events() if e.get("event") == "answer"][-1]["answer"]
        # The lease was priced at 0.001 credits an hour and a measured score: whatever the
        # worker said afterwards, it earns at most that price for the time (x10, the most
        # a score may scale a price), never the 20 credits of escrow.
        bound = 0.001 * 10 * took_h + 1e-6
        paid = sum(credits_of(e["amount"]) for e in self.payments(home))
        self.assertLessEqual(paid, bound, answer)
        self.assertLessEqual(credits_of(answer.get("paid", "0")), bound, answer)
        st = self.wait_job(user, job)
        self.assertEqual(st["state"], "done", st)
        self.assertEqual(credits_of(st["credits_spent"]), paid)
        self.assertAlmostEqual(credits_of(self.credits(user)["balance"]), 100 - paid, places=6)
        # Its device's score is what the coordinator measured, not the 9.9e14 it claimed.
        me = [d for d in self.pool_status(user)["devices"] if d["id"].startswith(self.peer_id(home))]
        self.assertEqual(len(me), 1)
        self.assertLess(me[0]["score"], 1e11, me[0])
        report = self.audit_ok()
        self.assertIn("every payment within its lease's terms", " ".join(report["checks"]))

    def test_a_pool_refuses_workers_over_its_max_price(self):
        self.start_pool("--max-price", "50")
        home = self.new_home("dear")
        line = self.fails(home, "pool", "join", self.ready["join"], "--cpu", "--price", "80", contains="50")
        self.assertIn("--price", line)
        self.start_worker("fair", "--price", "40")

    # --- no work without pay, no pay without work ---------------------------------------------

    def test_no_budget_submit_cannot_make_a_priced_worker_work_for_free(self):
        self.start_pool()
        priced = self.start_worker("priced", "--price", "10")
        poor = self.user("poor", credits=0)
        line = self.fails(poor, "pool", "submit", self.ready["submit"], "exec", "--shards", "2", "--", "echo", "hi",
                          contains="--budget")
        self.assertIn("free", line)
        self.assertEqual([e for e in priced.events() if e.get("event") == "task_started"], [])
        # With a free worker in the pool the job is taken, runs on free workers only, and says so.
        free = self.start_worker("free", "--price", "0")
        cp, lines = self.submit(poor, "--shards", "4", "--", "echo", "hi")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        submitted = [l for l in lines if l.get("event") == "submitted"][0]
        self.assertTrue(submitted["free_only"], submitted)
        done = lines[-1]
        self.assertEqual((done["state"], done["tasks"], done["credits_spent"]), ("done", 4, "0"), done)
        ran = {e["peer"] for e in self.coord.events() if e.get("event") == "task_done"}
        self.assertEqual(ran, {self.peer_id(self.tmp + "/free")})
        self.assertEqual([e for e in priced.events() if e.get("event") == "task_started"], [])
        self.assertTrue(free)
        self.audit_ok()

    def test_credits_are_minted_only_by_an_explicit_grant(self):
        # Per-identity starting credits are gone: the old flag is refused with what to do instead.
        home = self.new_home("oldstyle")
        cp = self.run_cli(home, "pool", "serve", "--json", "--listen", "127.0.0.1:0", "--starting-credits", "100",
                          *self.db_args(), timeout=30)
        self.assertNotEqual(cp.returncode, 0, cp.stdout)
        self.assertIn("pool grant", cp.stderr)
        self.start_pool()
        # Sybil minting: four fresh identities get nothing by showing up.
        sybils = [self.new_home("sybil%d" % i) for i in range(4)]
        for h in sybils:
            self.assertEqual(self.credits(h)["balance"], "0")
        self.assertEqual(self.audit_ok()["minted"], "0")
        # The coordinator grants explicitly ...
        rich = self.new_home("rich")
        self.grant(rich, 50)
        self.assertEqual(self.credits(rich)["balance"], "50")
        # ... or hands out a submit link that carries credits, once, to the first peer that uses it.
        cp = self.ok(self.chome, "pool", "link", "--credits", "30", "--json", *self.db_args())
        carried = json.loads(cp.stdout.strip().splitlines()[-1])
        self.assertEqual(carried["credits"], "30")
        first, second = self.new_home("first"), self.new_home("second")
        self.assertEqual(self.ok(first, "pool", "credits", carried["link"], "--json").stdout.count('"balance":"30"'), 1)
        again = json.loads(self.ok(first, "pool", "credits", carried["link"], "--json").stdout.strip().splitlines()[-1])
        self.assertEqual(again["balance"], "30")  # not twice
        other = json.loads(self.ok(second, "pool", "credits", carried["link"], "--json").stdout.strip().splitlines()[-1])
        self.assertEqual(other["balance"], "0")  # not to a second identity
        self.assertEqual(self.audit_ok()["minted"], "80")

    # --- exit status is a result ---------------------------------------------------------------

    def test_exit_3_is_a_failed_shard_with_its_stderr(self):
        self.start_pool()
        w1, w2 = self.start_worker("w1"), self.start_worker("w2")
        user = self.user()
        cmd = ("--", "sh", "-c", "if [ {shard} = 1 ]; then echo err{shard} >&2; exit 3; fi; echo ok{shard}")
        cp, lines = self.submit(user, "--shards", "3", "--budget", "5", *cmd)
        self.assertNotEqual(cp.returncode, 0)
        done = lines[-1]
        self.assertEqual(done["state"], "failed", done)
        self.assertGreaterEqual(done["failed"], 1, done)  # (shards never started fail with the job)
        self.assertEqual([(f["shard"], f["exit_code"], f["stderr"]) for f in done["failures"]], [(1, 3, "err1\n")], done)
        self.assertIn("exit code 3", done["reason"])
        st = self.job_of(user, done["job"])
        self.assertEqual([(f["shard"], f["exit_code"], f["stderr"]) for f in st["failures"]], [(1, 3, "err1\n")])
        # Not paid: the shard's task has no payment, and what the job spent is what the ledger moved.
        failed_task = done["job"] + ".1"
        paid = [e for h in (self.tmp + "/w1", self.tmp + "/w2") for e in self.payments(h)]
        self.assertNotIn(failed_task, [e["task"] for e in paid])
        self.assertAlmostEqual(credits_of(done["credits_spent"]),
                               sum(credits_of(e["amount"]) for e in paid if e["task"].startswith(done["job"] + ".")))
        self.assertAlmostEqual(credits_of(self.credits(user)["balance"]), 100 - credits_of(done["credits_spent"]))
        # --allow-failures: the job ends done, with the failure reported.
        cp, lines = self.submit(user, "--shards", "3", "--budget", "5", "--allow-failures", *cmd)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual((lines[-1]["state"], lines[-1]["failed"]), ("done", 1), lines[-1])
        self.assertEqual(lines[-1]["failures"][0]["exit_code"], 3)
        self.assertTrue(w1 and w2)
        self.audit_ok()

    def test_retries_run_a_failed_shard_elsewhere_and_failing_never_pays(self):
        self.start_pool()
        saboteur = self.start_worker("saboteur", env_extra={"RUNSNACK_POOL_FAULT": "exit-3"})
        user = self.user()
        sub = self.start(user, "pool", "submit", self.ready["submit"], "exec", "--shards", "2", "--budget", "5",
                         "--retries", "1", "--wait", "--json", "--out", os.path.join(self.tmp, "o"), *COMMAND,
                         name="submit")
        saboteur.wait_for(lambda e: e.get("event") == "result_refused", 60, "the saboteur's failure")
        self.start_worker("honest")
        done = sub.wait_for(lambda e: e.get("event") == "done", 120, "the job")
        self.assertEqual((done["state"], done["failed"]), ("done", 0), done)
        self.assertTrue(done["failures"], done)
        self.assertEqual({f["peer"] for f in done["failures"]}, {self.peer_id(self.tmp + "/saboteur")})
        ran = {e["peer"] for e in self.coord.events() if e.get("event") == "task_done"}
        self.assertEqual(ran, {self.peer_id(self.tmp + "/honest")})
        self.assertEqual(self.payments(self.tmp + "/saboteur"), [])  # reporting failure earns nothing
        for i in range(2):
            with open(os.path.join(self.tmp, "o", "shard-%d" % i, "r%d.txt" % i)) as f:
                self.assertEqual(f.read(), "shard %d of 2\n" % i)
        # Without --retries a shard that failed is not run again: the job fails.
        cp, lines = self.submit(user, "--shards", "1", "--budget", "5", "--", "sh", "-c", "echo no >&2; exit 4")
        self.assertEqual((lines[-1]["state"], len(lines[-1]["failures"])), ("failed", 1), lines[-1])
        self.audit_ok()

    # --- the coordinator keeps its address -------------------------------------------------------

    def test_restart_with_two_workers_mid_job_keeps_links_and_credits(self):
        self.start_pool()
        join, submit, port = self.ready["join"], self.ready["submit"], self.ready["listen"]
        names = ["w1", "w2"]
        workers = [self.start_worker(n) for n in names]
        user = self.user()
        shards = 30
        cp = self.ok(user, "pool", "submit", submit, "exec", "--shards", str(shards), "--budget", "10", "--json",
                     "--", "sh", "-c", "sleep 0.3; echo shard {shard}")
        job = json.loads(cp.stdout.strip().splitlines()[-1])["job"]
        self.coord.wait_for(lambda e: e.get("event") == "task_done" and
                            len([x for x in self.coord.events() if x.get("event") == "task_done"]) >= 4,
                            90, "a few tasks to finish")
        self.coord.signal(signal.SIGKILL)
        self.coord.wait(10)
        before = len([e for e in self.coord.events() if e.get("event") == "task_done"])
        self.assertLess(before, shards, "the coordinator should die mid-job")
        # Same home, no --listen: the same port and the same links.
        self.start_pool(listen=None, home=self.chome, name="coordinator2")
        self.assertEqual((self.ready["join"], self.ready["submit"], self.ready["listen"]), (join, submit, port))
        st = self.wait_job(user, job)
        self.assertEqual((st["state"], st["done"], st["failed"]), ("done", shards, 0), st)
        for w in workers:  # both came back by themselves, and both had work: a claim leases what it
            # asks for, not every pending task of the job (PostgreSQL once leased all 30 to one worker)
            self.assertTrue(len([e for e in w.events() if e.get("event") == "registered"]) >= 2, w.lines[-5:])
            self.assertTrue([e for e in w.events() if e.get("event") == "result_accepted"], (w.name, w.lines[-5:]))
        spent = credits_of(st["credits_spent"])
        self.assertGreater(spent, 0)
        self.assertAlmostEqual(credits_of(self.credits(user)["balance"]), 100 - spent, places=5)
        earned = sum(credits_of(self.credits(self.tmp + "/" + n)["balance"]) for n in names)
        self.assertAlmostEqual(earned, spent, places=5)  # none lost, none doubled
        self.assertEqual(self.audit_ok()["problems"], [])


class PoolBankTest(StoreCases, BankBase):
    # --- Sybils ----------------------------------------------------------------------------------

    def test_two_sybil_keys_on_one_network_are_not_verified(self):
        # Each shard's copies wait 2 s for a worker on another network (none comes), then are delivered.
        self.start_pool("--independent-wait", "2")
        # Two keys, one address: both return the same forged output (flip-bits is deterministic).
        sybils = [self.start_worker("sybil%d" % i, env_extra={"RUNSNACK_POOL_FAULT": "flip-bits"}) for i in range(2)]
        user = self.user()
        shards = 3
        cp, lines = self.submit(user, "--shards", str(shards), "--replicas", "2", "--budget", "10", *COMMAND)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        done = lines[-1]
        v = done["verification"]
        self.assertEqual(v["method"], "replication", v)
        self.assertIs(v["verified"], False, v)  # one network counts once: no independent quorum
        self.assertEqual(v["unverified"], shards, v)
        self.assertEqual(v["networks"], 1, v)
        self.assertIn("unverified", done["note"])
        waits = [e for e in self.coord.events() if e.get("event") == "copies_disagree"]
        self.assertTrue(waits and all(e["wants"] == "a copy on another network" for e in waits), waits)
        verified = [e for e in self.coord.events() if e.get("event") == "task_done" and e.get("verified") == "replication"]
        self.assertEqual(verified, [], "no result of the Sybils may be marked verified")
        # Their agreement is no evidence: it teaches the pool no known answer, so an honest
        # newcomer is not tested against their forgery, nor excluded.
        for s in sybils:
            s.stop()
        honest = self.start_worker("honest")
        cp, lines = self.submit(user, "--shards", "3", "--budget", "5", *COMMAND)
        self.assertEqual(lines[-1]["state"], "done", lines[-1])
        self.assertEqual([e for e in self.coord.events() if e.get("event") == "known_answer_issued"], [])
        self.assertEqual([e for e in self.coord.events() if e.get("event") == "device_excluded"], [])
        self.assertTrue(honest)

    # --- leases claimed and dropped (issue 37) ---------------------------------------------------

    def test_claiming_and_dropping_leases_cannot_fail_a_job(self):
        # On main before issue 37: three fresh identities that claimed every shard and closed
        # their sessions failed the job in seconds ("failed 3 times; last: worker ... went away").
        self.start_pool("--lease", "3")
        user = self.user()
        sub = self.start(user, "pool", "submit", self.ready["submit"], "exec", "--shards", "40", "--retries", "5",
                         "--budget", "20", "--wait", "--json", "--out", os.path.join(self.tmp, "o"), *COMMAND,
                         name="submit")
        sub.wait_for(lambda e: e.get("event") == "submitted", READY_DEADLINE, "the job")
        held = []
        for i in range(3):
            _, dropper = self.start_hostile("claim-drop", self.ready["join"], name="dropper%d" % i)
            self.assertEqual(dropper.wait(60), 0, dropper.events())
            held.append([e for e in dropper.events() if e.get("event") == "held"][0]["count"])
        # A device without results holds at most 2 leases (pool/scheduler.hpp kFirstLeases).
        self.assertTrue(all(1 <= n <= 2 for n in held), held)
        # One keeps its leases alive with heartbeats past the lease time (3 s): still at most 2.
        _, holder = self.start_hostile("claim-hold", self.ready["join"], "6", name="holder")
        holder.wait_for(lambda e: e.get("event") == "holding", READY_DEADLINE, "the holder's leases")
        honest = self.start_worker("honest")
        self.assertEqual(holder.wait(60), 0, holder.events())
        holding = [e["count"] for e in holder.events() if e.get("event") == "holding"]
        self.assertLessEqual(max(holding), 2, holder.events())
        done = sub.wait_for(lambda e: e.get("event") == "done", 240, "the job")
        self.assertEqual((done["state"], done["tasks"], done["failed"]), ("done", 40, 0), done)
        # The droppers are charged what they lost, earn nothing, and one that keeps dropping is excluded.
        status = self.pool_status(user)
        lost = sorted(d["leases_lost"] for d in status["devices"] if d["name"] == "hostile")
        self.assertEqual(len(lost), 4, status["devices"])
        self.assertTrue(all(n >= 1 for n in lost), lost)
        for home in sorted(h for h in os.listdir(self.tmp) if h.startswith(("dropper", "holder"))):
            if os.path.isdir(os.path.join(self.tmp, home)):
                self.assertEqual(self.payments(os.path.join(self.tmp, home)), [])
        self.assertTrue(honest)
        self.audit_ok()

    def test_a_device_that_keeps_dropping_its_leases_is_excluded(self):
        self.start_pool()
        user = self.user()
        sub = self.start(user, "pool", "submit", self.ready["submit"], "exec", "--shards", "6", "--budget", "10",
                         "--wait", "--json", "--out", os.path.join(self.tmp, "o"), *COMMAND, name="submit")
        sub.wait_for(lambda e: e.get("event") == "submitted", READY_DEADLINE, "the job")
        home, first = self.start_hostile("claim-drop", self.ready["join"], name="dropper")
        self.assertEqual(first.wait(60), 0, first.events())
        saved = harness.BIN
        harness.BIN = HOSTILE
        try:
            for i in range(6):  # the same identity, again and again: throttled to 1, then excluded
                again = self.start(home, "claim-drop", self.ready["join"], name="dropper-again%d" % i)
                if again.wait(60) != 0:
                    break
        finally:
            harness.BIN = saved
        refused = [e for e in again.events() if e.get("event") == "refused"]
        self.assertTrue(refused and "excluded" in refused[0]["why"], again.events())
        self.assertIn("leases lost", refused[0]["why"])
        honest = self.start_worker("honest")
        done = sub.wait_for(lambda e: e.get("event") == "done", 120, "the job")
        self.assertEqual((done["state"], done["failed"]), ("done", 0), done)
        self.assertEqual(self.payments(home), [])
        self.assertTrue(honest)
        self.audit_ok()

    # --- render results are checked --------------------------------------------------------------

    def test_forged_render_tiles_are_rejected_unpaid_and_the_image_is_right(self):
        self.start_pool()
        flipper_home = self.new_home("flipper")
        flipper = self.start(flipper_home, "pool", "join", self.ready["join"], "--cpu", name="flipper",
                             env_extra={"RUNSNACK_POOL_FAULT": "flip-bits"})
        flipper.wait_for(lambda e: e.get("event") == "registered", READY_DEADLINE, "the flipper's registration")
        forger_home, forger = self.start_hostile("forge-render", self.ready["join"], name="forger")
        user = self.user()
        tiled = os.path.join(self.tmp, "tiled.png")
        sub = self.start(user, "pool", "submit", self.ready["submit"], "render", "--scene", SCENE, "--width", "96",
                         "--height", "64", "--spp", "4", "--tile", "16", "--overlap", "4", "--budget", "10", "--wait",
                         "--json", "--out", tiled, name="submit")
        first = flipper.wait_for(lambda e: e.get("event") in ("result_refused", "result_accepted"), 120,
                                 "the flipper's first tile")
        self.assertEqual(first["event"], "result_refused", first)
        forged = forger.wait_for(lambda e: e.get("event") == "answer", 120, "the forger's first tile")
        self.assertFalse(forged["answer"].get("accepted"), forged)
        honest = [self.start_worker("honest%d" % i) for i in range(2)]
        done = sub.wait_for(lambda e: e.get("event") == "done", 240, "the render")
        self.assertEqual((done["state"], done["tasks"]), ("done", 24), done)
        v = done["verification"]
        self.assertEqual(v["method"], "pixel-spot-check", v)
        self.assertGreaterEqual(v["rejected"], 2, v)
        # (16 pixels of these tiny 24 x 24 tiles are 3% of their samples; the figure for real tiles,
        # 144 x 144, is bench/render_check_bench's, docs/PERFORMANCE.md)
        self.assertLess(v["cost_fraction"], 0.25, v)
        # Nothing of theirs accepted or paid; each wrong tile counted towards exclusion.
        self.assertEqual([e for e in flipper.events() if e.get("event") == "result_accepted"], [])
        self.assertEqual([e for e in forger.events() if e.get("event") == "answer" and e["answer"].get("accepted")], [])
        self.assertEqual(self.payments(flipper_home), [])
        self.assertEqual(self.payments(forger_home), [])
        status = self.pool_status(user)
        for home in (flipper_home, forger_home):
            me = [d for d in status["devices"] if d["id"].startswith(self.peer_id(home))]
            self.assertGreaterEqual(me[0]["invalid"], 1, me)
            self.assertEqual(me[0]["valid"], 0, me)
        # The image is the one the honest workers make alone: the same pixels, the same PNG.
        for c in (flipper, forger):
            c.stop()
        whole = os.path.join(self.tmp, "whole.png")
        cp = self.run_cli(user, "pool", "submit", self.ready["submit"], "render", "--scene", SCENE, "--width", "96",
                          "--height", "64", "--spp", "4", "--tile", "128", "--budget", "5", "--wait", "--json", "--out",
                          whole, timeout=300)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        with open(whole, "rb") as a, open(tiled, "rb") as b:
            self.assertEqual(a.read(), b.read())
        self.assertTrue(honest)
        self.audit_ok()

    # --- links --------------------------------------------------------------------------------

    def test_join_with_the_submit_link_stops_and_says_which_link(self):
        self.start_pool()
        home = self.new_home("confused")
        started = time.monotonic()
        proc = self.start(home, "pool", "join", self.ready["submit"], "--cpu", name="confused")
        rc = proc.wait(30)
        took = time.monotonic() - started
        self.assertIsNotNone(rc, "pool join kept retrying with the submit link")
        self.assertEqual(rc, 1)
        self.assertIn("join link", proc.stderr())
        self.assertIn("submit link", proc.stderr())
        print("\njoin with the submit link stopped after %.2f s" % took)
        # And the other way round.
        line = self.fails(home, "pool", "submit", self.ready["join"], "exec", "--", "true", contains="submit link")
        self.assertIn("join link", line)
        line = self.fails(home, "pool", "status", self.ready["join"], contains="submit link")
        self.assertTrue(line)


class PoolBankPostgresTest(PostgresMixin, StoreCases, BankBase):
    """The store-related cases again, on a PostgreSQL server of the test's own."""


if __name__ == "__main__":
    unittest.main()
