#!/usr/bin/env python3
"""The pool coordinator's own cost (issue 6's figures), on SQLite and on PostgreSQL.

  bench/pool_bench.py RUNSNACK_BINARY [--workers 16] [--tasks 10000] [--idle 64]

For each database: a coordinator and WORKERS real `runsnack pool join --cpu`
processes on loopback run a job of TASKS no-op tasks (`pool submit ... noop`):
every task is still leased, returned with a signed result, checked, paid and
recorded, only the work itself is empty. Printed per database:
  - throughput: tasks per second from submission to the job's end;
  - coordinator CPU per task (its user+system time over the job / tasks);
  - lease-to-result time per task (median and p99, from the database);
  - coordinator memory per idle worker connection: its RSS with IDLE idle
    workers connected, minus its RSS with none, over IDLE.
PostgreSQL is a throwaway server started here (Debian's postgresql).
"""

import argparse
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from test_pool_pg import PostgresServer, pg_bin_dir  # noqa: E402


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Bench:
    def __init__(self, binary, tmp):
        self.binary, self.tmp, self.procs = binary, tmp, []

    def env(self, home):
        e = dict(os.environ, RUNSNACK_HOME=home)
        e.pop("RUNSNACK_LINK", None)
        return e

    def start(self, name, *args):
        home = os.path.join(self.tmp, name)
        os.makedirs(home, exist_ok=True)
        log = open(os.path.join(self.tmp, name + ".log"), "w")
        p = subprocess.Popen([self.binary] + list(args), env=self.env(home), stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p, home

    def grant(self, chome, user_home, amount, *db_args):
        """Credits for the installation at user_home, granted on the coordinator (`pool grant`)."""
        os.makedirs(user_home, exist_ok=True)
        peer = subprocess.run([self.binary, "id"], env=self.env(user_home), stdout=subprocess.PIPE, text=True,
                              check=True).stdout.strip()
        subprocess.run([self.binary, "pool", "grant", peer, str(amount), *db_args], env=self.env(chome),
                       stdout=subprocess.DEVNULL, check=True)

    def wait_line(self, name, pred, timeout=60):
        path = os.path.join(self.tmp, name + ".log")
        deadline = time.time() + timeout
        while time.time() < deadline:
            with open(path) as f:
                for line in f:
                    if line.startswith("{"):
                        try:
                            e = json.loads(line)
                        except ValueError:
                            continue
                        if pred(e):
                            return e
            time.sleep(0.1)
        raise RuntimeError("timed out waiting in " + path)

    def count_lines(self, name, pred):
        n = 0
        with open(os.path.join(self.tmp, name + ".log")) as f:
            for line in f:
                if line.startswith("{"):
                    try:
                        n += bool(pred(json.loads(line)))
                    except ValueError:
                        pass
        return n

    def stop_all(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs = []


def lease_to_result_ms(db, chome, job):
    q = ("SELECT r.received - t.lease_start FROM results r JOIN tasks t ON t.id = r.task WHERE t.job = '%s'" % job)
    if db.startswith("postgres://"):
        out = subprocess.run(["psql", db, "-At", "-c", q], stdout=subprocess.PIPE, check=True, text=True).stdout
        vals = [int(x) for x in out.split()]
    else:
        con = sqlite3.connect(os.path.join(chome, "pool.db"))
        vals = [r[0] for r in con.execute(q)]
        con.close()
    vals.sort()
    return statistics.median(vals), vals[int(len(vals) * 0.99) - 1]


def run_one(binary, label, db_args, db_url, workers, tasks, idle):
    tmp = tempfile.mkdtemp(prefix="runsnack-poolbench-")
    b = Bench(binary, tmp)
    try:
        coord, chome = b.start("coord", "pool", "serve", "--json", "--listen", "127.0.0.1:0", *db_args)
        ready = b.wait_line("coord", lambda e: e.get("event") == "ready")
        time.sleep(1)
        rss0 = rss_kib(coord.pid)
        for i in range(idle):
            b.start("idle%d" % i, "pool", "join", ready["join"], "--cpu", "--price", "1")
        deadline = time.time() + 120
        while b.count_lines("coord", lambda e: e.get("event") == "device_registered") < idle:
            if time.time() > deadline:
                raise RuntimeError("idle workers did not all register")
            time.sleep(0.2)
        time.sleep(2)
        rss_idle = rss_kib(coord.pid)
        per_worker = (rss_idle - rss0) / idle if idle else 0
        b.stop_all()

        coord, chome = b.start("coord2", "pool", "serve", "--json", "--listen", "127.0.0.1:0", *db_args)
        ready = b.wait_line("coord2", lambda e: e.get("event") == "ready")
        for i in range(workers):
            b.start("w%d" % i, "pool", "join", ready["join"], "--cpu", "--price", "1")
        deadline = time.time() + 120
        while b.count_lines("coord2", lambda e: e.get("event") == "device_registered") < workers:
            if time.time() > deadline:
                raise RuntimeError("workers did not all register")
            time.sleep(0.2)
        user = os.path.join(tmp, "user")
        b.grant(chome, user, 1000000, *db_args)
        cpu0 = cpu_seconds(coord.pid)
        t0 = time.monotonic()
        cp = subprocess.run([binary, "pool", "submit", ready["submit"], "noop", "--shards", str(tasks), "--budget",
                             "100000", "--wait", "--json"], env=b.env(user), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, timeout=1800)
        elapsed = time.monotonic() - t0
        cpu = cpu_seconds(coord.pid) - cpu0
        done = json.loads(cp.stdout.strip().splitlines()[-1])
        if done.get("state") != "done":
            raise RuntimeError("job did not finish: %s %s" % (done, cp.stderr))
        st = subprocess.run([binary, "pool", "status", ready["submit"], "--json"], env=b.env(user),
                            stdout=subprocess.PIPE, text=True, timeout=60).stdout
        job = [j for j in json.loads(st.strip().splitlines()[-1])["jobs"] if j["job"] == done["job"]][0]
        if job["done"] != tasks:
            raise RuntimeError("the job ended with %d of %d tasks done" % (job["done"], tasks))
        median, p99 = lease_to_result_ms(db_url or "", chome, done["job"])
        return {"db": label, "workers": workers, "tasks": tasks, "seconds": round(elapsed, 2),
                "tasks_per_s": round(tasks / elapsed, 1), "coordinator_cpu_ms_per_task": round(1000 * cpu / tasks, 3),
                "lease_to_result_ms_median": median, "lease_to_result_ms_p99": p99,
                "idle_workers": idle, "coordinator_kib_per_idle_worker": round(per_worker, 1)}
    finally:
        b.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--tasks", type=int, default=10000)
    ap.add_argument("--idle", type=int, default=64)
    ap.add_argument("--only", choices=["sqlite", "postgres"])
    args = ap.parse_args()
    results = []
    if args.only != "postgres":
        results.append(run_one(args.binary, "sqlite", [], None, args.workers, args.tasks, args.idle))
    if args.only != "sqlite":
        bindir = pg_bin_dir()
        if not bindir:
            print("postgres: skipped (no PostgreSQL binaries; scripts/install-deps installs them)")
        else:
            pg = PostgresServer(bindir)
            url = pg.start()
            try:
                results.append(run_one(args.binary, "postgres", ["--db", url], url, args.workers, args.tasks, args.idle))
            finally:
                pg.stop()
    for r in results:
        print(json.dumps(r))
        print("pool %(db)s: %(tasks)d no-op tasks on %(workers)d workers in %(seconds)ss = %(tasks_per_s)s tasks/s; "
              "coordinator CPU %(coordinator_cpu_ms_per_task)s ms/task; lease to result median "
              "%(lease_to_result_ms_median)s ms (p99 %(lease_to_result_ms_p99)s ms); "
              "%(coordinator_kib_per_idle_worker)s KiB per idle worker (%(idle_workers)d connected)" % r)


if __name__ == "__main__":
    main()
