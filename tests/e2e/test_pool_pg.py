"""runsnack pool on PostgreSQL: two coordinator processes on one database.

Starts its own PostgreSQL server (Debian's postgresql package: initdb and
pg_ctl, its own data directory, a loopback port) and skips, saying why, when
the PostgreSQL binaries are not installed.
"""

import glob
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import READY_DEADLINE, free_port
from test_pool import PoolBase


def pg_bin_dir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return os.path.dirname(found[-1]) if found else None


class PostgresServer:
    """A throwaway PostgreSQL server on 127.0.0.1 (as the postgres user when run as root: initdb refuses root)."""

    def __init__(self, bindir):
        self.bindir = bindir
        self.dir = tempfile.mkdtemp(prefix="runsnack-pg-")
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.as_user = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def run(self, *args):
        cp = subprocess.run(self.as_user + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        if cp.returncode != 0:
            raise RuntimeError("%s failed: %s" % (args[0], cp.stdout.decode(errors="replace")))

    def start(self):
        # A throwaway cluster: no fsync at initdb (-N) nor while it runs. Durability across a power cut is not
        # what these tests check, and syncing every commit made the server most of the suite's time.
        self.run(os.path.join(self.bindir, "initdb"), "-N", "-D", self.data, "-U", "postgres", "--auth=trust", "-E",
                 "UTF8", "--locale=C.UTF-8")
        self.run(os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-l", os.path.join(self.dir, "log"), "-w",
                 "-t", "30", "-o", "-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off "
                 "-c full_page_writes=off" % (self.port, self.dir), "start")
        return "postgres://postgres@127.0.0.1:%d/postgres" % self.port

    def stop(self):
        try:
            self.run(os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


class PostgresMixin:
    """setUp starts a PostgreSQL server of the test's own; PoolBase's commands then use it (--db)."""

    def setUp(self):
        super().setUp()
        bindir = pg_bin_dir()
        if bindir is None:
            print("\nskipped: PostgreSQL binaries missing (/usr/lib/postgresql/*/bin; apt-get install postgresql)")
            self.skipTest("PostgreSQL binaries missing (apt-get install postgresql)")
        self.pg = PostgresServer(bindir)
        self.db_url = self.url = self.pg.start()
        self.addCleanup(self.pg.stop)


class PoolPostgresTest(PostgresMixin, PoolBase):
    def serve(self, name):
        home = self.new_home(name)
        proc = self.start(home, "pool", "serve", "--json", "--listen", "127.0.0.1:0", "--db", self.url, name=name)
        ready = proc.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready")
        self.assertTrue(ready["db"].startswith("postgres://"), ready)
        return proc, ready

    def test_two_coordinators_one_database(self):
        coord_a, ready_a = self.serve("coordinator-a")
        coord_b, ready_b = self.serve("coordinator-b")
        self.chome = self.tmp + "/coordinator-a"
        workers = []
        for i in range(8):
            self.ready = ready_a if i % 2 == 0 else ready_b
            workers.append(self.start_worker("worker%d" % i))
        self.ready = ready_a
        user = self.user()
        out = os.path.join(self.tmp, "out")
        shards = 80
        cp, lines = self.submit(user, "--shards", str(shards), "--budget", "20", "--out", out, "--",
                                "sh", "-c", "sleep 0.05; echo shard {shard}")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        done = lines[-1]
        self.assertEqual(done["state"], "done", done)
        self.assertEqual(done["tasks"], shards)
        self.assertEqual(done["failed"], 0)
        for i in range(shards):
            with open(os.path.join(out, "shard-%d" % i, "stdout")) as f:
                self.assertEqual(f.read(), "shard %d\n" % i)
        # Both coordinators handed out work; no task ran twice, none was lost.
        done_a = [e["task"] for e in coord_a.events() if e.get("event") == "task_done"]
        done_b = [e["task"] for e in coord_b.events() if e.get("event") == "task_done"]
        self.assertTrue(done_a and done_b, (len(done_a), len(done_b)))
        self.assertEqual(len(done_a) + len(done_b), shards)
        self.assertEqual(len(set(done_a) | set(done_b)), shards)
        started = [e["task"] for w in workers for e in w.events() if e.get("event") == "task_started"]
        self.assertEqual(len(started), shards, "a task ran twice")
        self.assertEqual(len(set(started)), shards)
        # The ledger (on the shared database) balances; the user paid what the workers earned.
        spent = float(done["credits_spent"])
        self.assertGreater(spent, 0)
        self.assertAlmostEqual(float(self.credits(user)["balance"]), 100 - spent, places=5)
        earned = sum(float(self.credits(self.tmp + "/worker%d" % i)["balance"]) for i in range(8))
        self.assertAlmostEqual(earned, spent, places=5)
        cp = self.ok(self.chome, "pool", "audit-ledger", "--db", self.url, "--json")
        report = json.loads(cp.stdout.strip().splitlines()[-1])
        self.assertTrue(report["ok"], report)
        self.assertEqual(report["problems"], [])


if __name__ == "__main__":
    unittest.main()
