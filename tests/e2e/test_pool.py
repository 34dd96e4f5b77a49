"""runsnack pool end to end: a coordinator, CPU workers and consumers on loopback."""

import json
import os
import re
import signal
import time
import unittest

from harness import E2ETestCase, READY_DEADLINE, free_port, replace_query_param, split_link


class PoolBase(E2ETestCase):
    db_url = None  # a PostgreSQL URL in the PostgreSQL variants; SQLite in the coordinator's home otherwise

    def db_args(self):
        return ["--db", self.db_url] if self.db_url else []

    def start_pool(self, *extra, listen="127.0.0.1:0", home=None, name="coordinator"):
        """`pool serve` in the coordinator's home (a new one unless given); listen=None: as stored."""
        self.chome = home or self.new_home("coordinator")
        args = ["pool", "serve", "--json"] + (["--listen", listen] if listen else []) + self.db_args() + list(extra)
        self.coord = self.start(self.chome, *args, name=name)
        self.ready = self.coord.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready")
        self.assertIsNone(self.ready["http"])
        return self.ready

    def start_worker(self, name, *extra, env_extra=None, link=None, trusted=False):
        """`pool join` from a new home; trusted: the coordinator vouches for it first (`pool trust`)."""
        home = self.new_home(name)
        if trusted:
            self.ok(self.chome, "pool", "trust", self.peer_id(home), *self.db_args())
        w = self.start(home, "pool", "join", link or self.ready["join"], "--cpu", *extra, name=name, env_extra=env_extra)
        w.wait_for(lambda e: e.get("event") == "registered", READY_DEADLINE, "registration of " + name)
        return w

    def grant(self, home, amount):
        """Credits for the installation at `home`, granted explicitly on the coordinator."""
        self.ok(self.chome, "pool", "grant", self.peer_id(home), str(amount), *self.db_args())

    def user(self, name="user", credits=100):
        home = self.new_home(name)
        if credits:
            self.grant(home, credits)
        return home

    def submit(self, home, *args, timeout=240):
        if "--out" not in args:  # never write into the source tree
            args = ("--out", os.path.join(self.tmp, "out-" + os.path.basename(home))) + args
        cp = self.run_cli(home, "pool", "submit", self.ready["submit"], "exec", "--wait", "--json", *args,
                          timeout=timeout)
        lines = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]
        return cp, lines

    def audit_ok(self):
        cp = self.ok(self.chome, "pool", "audit-ledger", "--json", *self.db_args())
        report = json.loads(cp.stdout.strip().splitlines()[-1])
        self.assertTrue(report["ok"], report)
        return report

    def credits(self, home):
        cp = self.ok(home, "pool", "credits", self.ready["submit"], "--json")
        return json.loads(cp.stdout.strip().splitlines()[-1])

    def pool_status(self, home):
        cp = self.ok(home, "pool", "status", self.ready["submit"], "--json")
        return json.loads(cp.stdout.strip().splitlines()[-1])

    def payments(self, home):
        return [e for e in self.credits(home)["entries"] if e["kind"] == "payment"]


class PoolTest(PoolBase):
    def test_a_pools_links_and_hints_name_pool_serve_not_share(self):
        """Issue 39 (10): `pool join --help` and a worker that cannot reach its coordinator talked about
        `runsnack share`; a pool's links come from `runsnack pool serve`."""
        home = self.new_home("reader")
        for sub in ("join", "submit", "status"):
            text = self.ok(home, "pool", sub, "--help").stdout
            self.assertIn("pool serve", text, sub)
            self.assertNotIn("runsnack share", text, sub)
        self.start_pool()
        self.coord.stop()
        worker = self.start(self.new_home("w"), "pool", "join", self.ready["join"], "--cpu", name="w")
        self.poll_until(lambda: "still running" in worker.stderr(), 60, "the worker's retry warning")
        worker.stop()
        self.assertIn("is `runsnack pool serve` still running", worker.stderr())
        self.assertNotIn("runsnack share", worker.stderr())
        cp = self.run_cli(self.user(credits=0), "pool", "status", self.ready["submit"])
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn("is `runsnack pool serve` still running", cp.stderr)

    def test_a_worker_states_its_cap_per_task_and_status_shows_it(self):
        """pool join --max-task-seconds reaches the coordinator; pool status shows the cap and no browser mark."""
        self.start_pool()
        self.fails(self.new_home("bad"), "pool", "join", self.ready["join"], "--cpu", "--max-task-seconds", "0",
                   contains="--max-task-seconds must be in 1..86400")
        self.start_worker("capped", "--max-task-seconds", "30")
        self.start_worker("plain")
        user = self.user()
        devices = self.pool_status(user)["devices"]
        self.assertEqual(sorted(str(d["max_task_seconds"]) for d in devices), ["30", "None"], devices)
        self.assertEqual([d["browser"] for d in devices], [False, False], devices)
        text = self.ok(user, "pool", "status", self.ready["submit"]).stdout
        self.assertRegex(text, r"KIND +NAME +CAP ", text)
        self.assertRegex(text, r"cpu +cpu +30s ", text)

    def test_job_across_workers_every_shard_present(self):
        self.start_pool()
        workers = [self.start_worker("worker%d" % i) for i in range(4)]
        user = self.user()
        out = os.path.join(self.tmp, "out")
        shards = 200
        cp, lines = self.submit(user, "--shards", str(shards), "--budget", "10", "--out", out, "--",
                                "sh", "-c", "echo shard {shard} of {shards} $RUNSNACK_SHARD; echo x > out/f{shard}")
        self.assertEqual(cp.returncode, 0, (cp.stderr, lines[-3:]))
        done = lines[-1]
        self.assertEqual(done["event"], "done")
        self.assertEqual(done["state"], "done", done)
        self.assertEqual(done["tasks"], shards)
        self.assertEqual(done["failed"], 0)
        for i in range(shards):
            with open(os.path.join(out, "shard-%d" % i, "stdout")) as f:
                self.assertEqual(f.read(), "shard %d of %d %d\n" % (i, shards, i))
            self.assertTrue(os.path.exists(os.path.join(out, "shard-%d" % i, "f%d" % i)))
        busy = [w for w in workers if any(e.get("event") == "result_accepted" for e in w.events())]
        self.assertEqual(len(busy), 4, "every worker should have run tasks")
        spent = float(done["credits_spent"])
        self.assertGreater(spent, 0)
        self.assertAlmostEqual(float(self.credits(user)["balance"]), 100 - spent, places=5)
        self.audit_ok()

    def test_coordinator_registers_at_a_rendezvous_and_a_worker_finds_it_there(self):
        rdv = self.start(self.new_home("rdv"), "rendezvous", "--listen", "127.0.0.1:0", "--json", name="rdv")
        rdv_ready = rdv.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "the rendezvous")
        rdv_address = "127.0.0.1:" + rdv_ready["listen"].rsplit(":", 1)[1]
        ready = self.start_pool("--rendezvous", rdv_address, "--no-port-mapping")
        self.assertEqual(ready["rendezvous"], rdv_address)
        for kind in ("join", "submit"):
            self.assertTrue(ready[kind].startswith("runsnack://%s/g/" % rdv_address), ready[kind])
        self.coord.wait_for(lambda e: e.get("event") == "rendezvous" and e["state"].startswith("registered"),
                            READY_DEADLINE, "the coordinator's registration at the rendezvous")
        # The join link without its addresses: the worker reaches the coordinator only through the rendezvous.
        through_rdv = replace_query_param(ready["join"], "c", None)
        self.assertIsNone(split_link(through_rdv)["c"])
        self.start_worker("w", link=through_rdv)
        user = self.user()
        cp, lines = self.submit(user, "--shards", "2", "--budget", "5", "--", "echo", "hi")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(lines[-1]["state"], "done", lines)
        # `pool link` names the rendezvous too (it was saved with the coordinator's address).
        cp = self.ok(self.chome, "pool", "link", "--json", *self.db_args())
        made = json.loads(cp.stdout.strip().splitlines()[-1])
        self.assertTrue(made["link"].startswith("runsnack://%s/g/" % rdv_address), made)

    def test_status_jobs_credits_and_cancel_read_as_tables_without_json(self):
        self.start_pool()
        self.start_worker("w")
        user = self.user()
        cp, lines = self.submit(user, "--shards", "2", "--budget", "5", "--", "echo", "hi")
        self.assertEqual(lines[-1]["state"], "done", lines)
        first = lines[-1]["job"]
        cp = self.ok(user, "pool", "submit", self.ready["submit"], "exec", "--shards", "1", "--budget", "5", "--",
                     "sleep", "60")
        second = cp.stdout.strip()
        jobs = self.ok(user, "pool", "jobs", self.ready["submit"]).stdout
        self.assertNotIn("{", jobs)
        self.assertIn("JOB", jobs.splitlines()[0])
        row = [l for l in jobs.splitlines() if l.startswith(first)]
        self.assertEqual(len(row), 1, jobs)
        self.assertIn("done", row[0])
        self.assertIn("2/2", row[0])
        self.assertIn(second, jobs)
        cancel = self.ok(user, "pool", "cancel", self.ready["submit"], second).stdout
        self.assertEqual(cancel.strip(), "cancelled job %s: its tasks stop and the unspent budget is back in your "
                                         "balance" % second)
        status = self.ok(user, "pool", "status", self.ready["submit"]).stdout
        self.assertIn("1 device(s), 1 online", status)
        self.assertTrue(any(l.startswith(second) and "cancelled" in l for l in status.splitlines()), status)
        balance = self.credits(user)["balance"]
        credits = self.ok(user, "pool", "credits", self.ready["submit"]).stdout
        self.assertTrue(credits.startswith("balance: %s credits (peer " % balance), credits)
        self.assertIn("escrow", credits)
        self.assertIn("refund", credits)

    def test_gpu_worker_offers_its_gpus_and_tasks_see_only_them(self):
        fake = os.environ.get("RUNSNACK_FAKE_NVML")
        if not fake:
            self.skipTest("RUNSNACK_FAKE_NVML (the stand-in NVML built with gpu_test) is not set")
        self.start_pool()
        home = self.new_home("gpuworker")
        w = self.start(home, "pool", "join", self.ready["join"], "--gpu", "1", name="gpuworker",
                       env_extra={"RUNSNACK_NVML_LIBRARY": fake})
        w.wait_for(lambda e: e.get("event") == "registered", READY_DEADLINE, "registration")
        user = self.user()
        out = os.path.join(self.tmp, "out")
        cp, lines = self.submit(user, "--shards", "2", "--budget", "5", "--out", out, "--", "sh", "-c",
                                "echo $CUDA_VISIBLE_DEVICES")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        for i in range(2):
            with open(os.path.join(out, "shard-%d" % i, "stdout")) as f:
                self.assertEqual(f.read(), "1\n")
        status = json.loads(self.ok(user, "pool", "status", self.ready["submit"], "--json").stdout.strip().splitlines()[-1])
        self.assertEqual([(d["kind"], d["name"]) for d in status["devices"]], [("gpu", "Fake GPU 1")])
        # Without a GPU to offer, join says so and what to do instead.
        self.fails(self.new_home("nogpu"), "pool", "join", self.ready["join"], "--gpu", "all", contains="--cpu",
                   env_extra={"RUNSNACK_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"})

    def test_task_time_limit_stops_the_shard_and_fails_the_job_with_the_reason(self):
        self.start_pool("--lease", "5")
        self.start_worker("w", "--task-timeout", "1s")
        user = self.user()
        started = time.monotonic()
        cp, lines = self.submit(user, "--shards", "1", "--budget", "5", "--", "sleep", "60")
        self.assertNotEqual(cp.returncode, 0)
        done = lines[-1]
        self.assertEqual(done["state"], "failed", done)
        self.assertIn("time limit", done["reason"])
        self.assertLess(time.monotonic() - started, 50, "three 1 s attempts, not a 60 s sleep")

    def test_learned_scheduler_runs_jobs_to_completion(self):
        self.start_pool()  # the learned scheduler is the default
        workers = [self.start_worker("w%d" % i) for i in range(3)]
        user = self.user()
        out = os.path.join(self.tmp, "out")
        shards = 40
        cp, lines = self.submit(user, "--shards", str(shards), "--prefer", "fast", "--budget", "10", "--out", out,
                                "--", "sh", "-c", "echo s{shard}")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual((lines[-1]["state"], lines[-1]["tasks"], lines[-1]["failed"]), ("done", shards, 0))
        for i in range(shards):
            with open(os.path.join(out, "shard-%d" % i, "stdout")) as f:
                self.assertEqual(f.read(), "s%d\n" % i)
        busy = [w for w in workers if any(e.get("event") == "result_accepted" for e in w.events())]
        self.assertGreaterEqual(len(busy), 2, "new devices get tried")
        bad = self.run_cli(user, "pool", "submit", self.ready["submit"], "exec", "--prefer", "soon", "--", "true")
        self.assertEqual(bad.returncode, 2)  # a usage error
        self.assertIn("--prefer", bad.stderr)
        self.audit_ok()
        # What it learned is kept in the database across a restart: a restarted coordinator
        # shows the same estimates for each device.
        def learned(ready):
            status = json.loads(self.ok(user, "pool", "status", ready["submit"], "--json").stdout.strip().splitlines()[-1])
            return {d["id"]: d["learned"] for d in status["devices"]}
        before = learned(self.ready)
        for w in busy:
            mine = [v for k, v in before.items() if k.startswith(self.peer_id(self.tmp + "/" + w.name))]
            self.assertEqual(len(mine), 1)
            self.assertGreater(mine[0]["exec"]["observations"], 0, before)
        self.coord.signal(signal.SIGTERM)
        self.assertEqual(self.coord.wait(20), 0)
        import sqlite3
        con = sqlite3.connect(os.path.join(self.chome, "pool.db"))
        (state,) = con.execute("SELECT state FROM scheduler_state").fetchone()
        con.close()
        for w in busy:
            self.assertIn(self.peer_id(self.tmp + "/" + w.name), state)
        for w in workers:  # they would reconnect and teach it more
            w.signal(signal.SIGTERM)
            w.wait(20)
        again = self.start(self.chome, "pool", "serve", "--json", "--listen", "127.0.0.1:0", name="coordinator2")
        ready = again.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready after the restart")
        after = learned(ready)
        for device, estimates in before.items():
            self.assertEqual(set(after[device]), set(estimates), device)
            for workload, e in estimates.items():
                self.assertEqual(after[device][workload]["observations"], e["observations"], device)
                self.assertAlmostEqual(after[device][workload]["success"], e["success"], places=9)

    def test_fastest_first_scheduler_still_runs_jobs(self):
        self.start_pool("--scheduler", "fastest")
        self.start_worker("w")
        user = self.user()
        cp, lines = self.submit(user, "--shards", "3", "--prefer", "cheap", "--budget", "5", "--", "sh", "-c",
                                "echo s{shard}")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual((lines[-1]["state"], lines[-1]["tasks"], lines[-1]["failed"]), ("done", 3, 0))

class PoolFaultTest(PoolBase):
    """Refusals, faulty and vanishing workers, a killed coordinator (its own ctest entry, e2e_pool_faults)."""

    def test_too_little_credit_refused_with_balance(self):
        self.start_pool()
        user = self.user(credits=5)
        line = self.fails(user, "pool", "submit", self.ready["submit"], "exec", "--shards", "2", "--budget", "50",
                          "--", "true", contains="balance 5")
        self.assertIn("not enough credit", line)
        self.audit_ok()

    def test_bad_signature_is_refused_and_not_paid(self):
        self.start_pool()
        self.start_worker("liar", env_extra={"RUNSNACK_POOL_FAULT": "bad-signature"})
        user = self.user()
        cp, lines = self.submit(user, "--shards", "1", "--budget", "1", "--", "echo", "hi")
        self.assertEqual(lines[-1]["state"], "failed", lines)
        self.assertEqual(lines[-1]["credits_spent"], "0")
        rejected = [e for e in self.coord.events() if e.get("event") == "result_rejected"]
        self.assertTrue(rejected and "signature" in rejected[0]["reason"], rejected)
        self.assertEqual(self.credits(user)["balance"], "100")
        self.audit_ok()

    def test_mistyped_fields_are_refused_and_the_worker_stays(self):
        self.start_pool()
        w = self.start_worker("odd", env_extra={"RUNSNACK_POOL_FAULT": "mistyped"})
        refused = w.wait_for(lambda e: e.get("event") == "mistyped_refused" and "job" in e["why"], READY_DEADLINE,
                             "the last mistyped message refused")
        self.assertNotIn("malformed message", refused["why"])  # refused by the handler, not the safety net
        self.assertEqual(len([e for e in w.events() if e.get("event") == "mistyped_refused"]), 3)
        # The same stream then runs a job: it was never closed.
        user = self.user()
        cp, lines = self.submit(user, "--shards", "2", "--budget", "2", "--", "echo", "hi")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual((lines[-1]["state"], lines[-1]["tasks"], lines[-1]["failed"]), ("done", 2, 0))
        self.assertFalse([e for e in self.coord.events() if e.get("event") == "worker_gone"])
        self.assertEqual(len([e for e in w.events() if e.get("event") == "registered"]), 1)  # no reconnect either

    def test_malformed_result_is_refused(self):
        self.start_pool()
        self.start_worker("broken", env_extra={"RUNSNACK_POOL_FAULT": "malformed"})
        user = self.user()
        cp, lines = self.submit(user, "--shards", "1", "--budget", "1", "--", "echo", "hi")
        self.assertEqual(lines[-1]["state"], "failed", lines)
        rejected = [e for e in self.coord.events() if e.get("event") == "result_rejected"]
        self.assertTrue(rejected and "malformed" in rejected[0]["reason"], rejected)
        self.audit_ok()

    def test_killed_worker_task_finishes_elsewhere(self):
        self.start_pool()
        doomed = self.start_worker("doomed")
        user = self.user()
        sub = self.start(user, "pool", "submit", self.ready["submit"], "exec", "--shards", "1", "--budget", "5",
                         "--wait", "--json", "--out", os.path.join(self.tmp, "o"), "--", "sh", "-c",
                         "sleep 2; echo finished", name="submit")
        doomed.wait_for(lambda e: e.get("event") == "task_started", 60, "the task to start")
        doomed.signal(signal.SIGKILL)
        doomed.wait(10)
        self.start_worker("finisher")
        done = sub.wait_for(lambda e: e.get("event") == "done", 120, "the job to finish")
        self.assertEqual(done["state"], "done", done)
        peers = {e["peer"] for e in self.coord.events() if e.get("event") == "task_done"}
        self.assertEqual(peers, {self.peer_id(self.tmp + "/finisher")})
        # (a peer gets no credits for showing up: only what it earned)
        self.assertEqual(float(self.credits(self.tmp + "/doomed")["balance"]), 0)
        self.assertGreater(float(self.credits(self.tmp + "/finisher")["balance"]), 0)
        self.audit_ok()

    def test_revoked_join_link_drops_workers(self):
        self.start_pool()
        w = self.start_worker("w")
        self.ok(self.chome, "revoke", self.ready["join_grant"])
        rc = w.wait(20)
        self.assertIsNotNone(rc, "worker still running 20 s after its join link was revoked")
        self.assertEqual(rc, 1)
        gone = self.coord.wait_for(lambda e: e.get("event") == "worker_gone", 10, "worker_gone")
        self.assertTrue(gone)
        self.audit_ok()

    def job_status(self, link, home, job):
        cp = self.ok(home, "pool", "status", link, "--json")
        jobs = [j for j in json.loads(cp.stdout.strip().splitlines()[-1])["jobs"] if j["job"] == job]
        self.assertEqual(len(jobs), 1)
        return jobs[0]

    def test_coordinator_killed_and_restarted_job_completes(self):
        port = free_port()
        listen = "127.0.0.1:%d" % port
        self.start_pool(listen=listen)
        submit_link = self.ready["submit"]
        names = ["w%d" % i for i in range(3)]
        workers = [self.start_worker(n) for n in names]
        # Both users get their credits before the job starts: each grant is two runs of the
        # binary, long enough for 3 workers to finish the whole job before the kill.
        user = self.user()
        waiter_home = self.user("waiter")
        shards = 40
        cp = self.ok(user, "pool", "submit", submit_link, "exec", "--shards", str(shards), "--budget", "10", "--json",
                     "--", "sh", "-c", "sleep 0.3; echo shard {shard}")
        job = json.loads(cp.stdout.strip().splitlines()[-1])["job"]
        # A second user waits for a small job across the restart: --wait reconnects by itself.
        waiter = self.start(waiter_home, "pool", "submit", submit_link, "exec", "--shards", "6", "--budget", "5",
                            "--wait", "--json", "--out", os.path.join(self.tmp, "waiter-out"), "--",
                            "sh", "-c", "sleep 0.5; echo w{shard}", name="waiter")
        waiter.wait_for(lambda e: e.get("event") == "submitted", READY_DEADLINE, "the waiter's submission")
        self.coord.wait_for(lambda e: e.get("event") == "task_done" and
                            len([x for x in self.coord.events() if x.get("event") == "task_done"]) >= 5,
                            60, "a few tasks to finish")
        self.coord.signal(signal.SIGKILL)
        self.coord.wait(10)
        self.assertLess(len([e for e in self.coord.events() if e.get("event") == "task_done"]), shards,
                        "the coordinator should die mid-job")
        # Same home, same database, same port: the workers' join link and the submit link still work.
        self.coord = self.start(self.chome, "pool", "serve", "--json", "--listen", listen, name="coordinator2")
        self.coord.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready after restart")
        deadline = time.time() + 120
        while True:
            st = self.job_status(submit_link, user, job)
            if st["state"] != "running" or time.time() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(st["state"], "done", st)
        self.assertEqual(st["done"], shards)
        self.assertEqual(st["failed"], 0)
        self.assertEqual(waiter.wait(120), 0, waiter.stderr())
        waited = [e for e in waiter.events() if e.get("event") == "done"]
        self.assertEqual(len(waited), 1)
        self.assertEqual((waited[0]["state"], waited[0]["tasks"]), ("done", 6))
        self.assertEqual(len([e for e in waiter.events() if e.get("event") == "submitted"]), 1, "submitted once")
        self.assertIn("reconnecting", waiter.stderr())
        with open(os.path.join(self.tmp, "waiter-out", "stdout")) as f:
            self.assertEqual(f.read(), "".join("w%d\n" % i for i in range(6)))
        spent = float(st["credits_spent"])
        self.assertGreater(spent, 0)
        # No credit lost or doubled: what the user paid is exactly what the workers earned.
        self.assertAlmostEqual(float(self.credits(user)["balance"]), 100 - spent, places=5)
        spent += float(waited[0]["credits_spent"])
        earned = sum(float(self.credits(self.tmp + "/" + n)["balance"]) for n in names)
        self.assertAlmostEqual(earned, spent, places=5)
        accepted = sum(len([e for e in w.events() if e.get("event") == "result_accepted"]) for w in workers)
        self.assertLessEqual(accepted, shards + 6)  # both jobs, each task at most once
        report = self.audit_ok()
        self.assertEqual(report["problems"], [])

    def test_worker_that_never_returns_lease_expires(self):
        self.start_pool("--lease", "3")
        frozen = self.start_worker("frozen")
        self.addCleanup(lambda: frozen.popen.poll() is None and frozen.signal(signal.SIGCONT))
        user = self.user()
        sub = self.start(user, "pool", "submit", self.ready["submit"], "exec", "--shards", "1", "--budget", "5",
                         "--wait", "--json", "--out", os.path.join(self.tmp, "o"), "--", "sh", "-c",
                         "sleep 1; echo finished", name="submit")
        frozen.wait_for(lambda e: e.get("event") == "task_started", 60, "the task to start")
        frozen.signal(signal.SIGSTOP)  # alive, connected, silent: only the lease deadline notices
        finisher = self.start_worker("finisher")
        expired = self.coord.wait_for(lambda e: e.get("event") == "leases_expired", 30, "the lease to expire")
        self.assertEqual(expired["count"], 1)
        done = sub.wait_for(lambda e: e.get("event") == "done", 60, "the job to finish")
        self.assertEqual(done["state"], "done", done)
        self.assertFalse([e for e in self.coord.events() if e.get("event") == "worker_gone"],
                         "the lease, not the connection's idle timeout, should have requeued the task")
        peers = {e["peer"] for e in self.coord.events() if e.get("event") == "task_done"}
        self.assertEqual(peers, {self.peer_id(self.tmp + "/finisher")})
        # The frozen worker wakes up late: its next heartbeat is told the lease is gone and it stops the
        # task (a result it sent before that one would be refused); either way it is not paid.
        frozen.signal(signal.SIGCONT)
        late = frozen.wait_for(lambda e: e.get("event") in ("task_stopped", "result_refused", "result_accepted"), 30,
                               "the late result")
        self.assertIn(late["event"], ("task_stopped", "result_refused"), late)
        if late["event"] == "task_stopped":
            self.assertIn("lease expired", late["why"])
        self.assertEqual(float(self.credits(self.tmp + "/frozen")["balance"]), 0)
        self.assertGreater(float(self.credits(self.tmp + "/finisher")["balance"]), 0)
        self.assertTrue(finisher)
        self.audit_ok()


if __name__ == "__main__":
    unittest.main()
