#!/usr/bin/env python3
"""Writes the state an older runsnack leaves behind, for test_upgrade_state.py.

    make_fixture.py OLD_RUNSNACK OUT_DIR

OLD_RUNSNACK: a runsnack built from an older revision (tests/package/upgrade_from_rev.sh shows
how to build one). In fresh homes it makes what a user of that version has: a provider with a
live link (`share --allow run,cp`), a consumer that used it (an `info`, a file written in its
workspace by `run`), and a coordinator whose job a worker finished (credits paid). OUT_DIR gets
each home as text (SQLite databases as SQL, so a diff of the fixture reads), and expected.json:
the link and what the old binary itself said about the pool, which the test compares against.
"""

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Old:
    def __init__(self, binary, tmp):
        self.binary, self.tmp, self.procs = binary, tmp, []

    def env(self, home):
        return dict(os.environ, RUNSNACK_HOME=os.path.join(self.tmp, home), RUNSNACK_LOG="warn")

    def run(self, home, *args, check=True):
        r = subprocess.run([self.binary] + list(args), env=self.env(home), capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL, cwd=self.tmp)
        if r.returncode != 0 and not check:
            return None
        if r.returncode != 0:
            raise SystemExit("runsnack %s failed (%d): %s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r.stdout

    def start(self, home, *args):
        p = subprocess.Popen([self.binary] + list(args), env=self.env(home), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, cwd=self.tmp)
        self.procs.append(p)
        return p, json.loads(p.stdout.readline())

    def stop(self, p):
        p.terminate()
        p.wait(timeout=30)
        self.procs.remove(p)


def dump_home(src, dst):
    """Copies a home: *.db as *.sql, other files as they are, sockets and runtime files left out."""
    for dirpath, _, files in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.isfile(path) or name.endswith(("-wal", "-shm", ".sock", ".lock")):
                continue
            target = os.path.join(dst, rel, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if name.endswith(".db"):
                db = sqlite3.connect(path)
                with open(target[:-3] + ".sql", "w") as f:
                    f.write("\n".join(db.iterdump()) + "\n")
                db.close()
            else:
                shutil.copy2(path, target)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    binary, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmp = tempfile.mkdtemp(prefix="runsnack-fixture-")
    old = Old(binary, tmp)
    try:
        version = old.run("provider", "--version").strip()
        # A provider with a live link, and a consumer that used it.
        share, ready = old.start("provider", "share", "--json", "--no-qr", "--no-port-mapping", "--listen",
                                 "127.0.0.1:%d" % free_port(), "--allow", "run,cp")
        link = ready["link"]
        info = json.loads(old.run("consumer", "info", "--json", link))
        old.run("consumer", "run", "--no-sync", link, "--", "sh", "-c", "echo written by %s > kept.txt" % version)
        old.stop(share)

        # A coordinator, a worker that finishes a job, and the consumer who paid for it.
        serve, pool = old.start("coordinator", "pool", "serve", "--json", "--starting-credits", "100",
                                 "--listen", "127.0.0.1:%d" % free_port())
        worker = subprocess.Popen([binary, "pool", "join", "--cpu", pool["join"]], env=old.env("worker"),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
        old.procs.append(worker)
        job = json.loads(old.run("consumer", "pool", "submit", "--json", pool["submit"], "noop", "--shards",
                                 "3").strip().splitlines()[-1])["job"]
        jobs = None
        for _ in range(300):
            said = old.run("consumer", "pool", "jobs", "--json", pool["submit"], check=False)
            jobs = json.loads(said) if said else jobs
            if jobs and any(j.get("job") == job and j.get("state") == "done" for j in jobs.get("jobs", [])):
                break
            time.sleep(0.5)
        else:
            raise SystemExit("the job did not finish: %s" % jobs)
        credits = json.loads(old.run("consumer", "pool", "credits", "--json", pool["submit"]))
        old.stop(worker)
        old.stop(serve)

        shutil.rmtree(out, ignore_errors=True)
        for home in ("provider", "consumer", "coordinator"):
            dump_home(os.path.join(tmp, home), os.path.join(out, home))
        expected = {"version": version, "link": link, "grant": ready["grant"], "provider": ready["peer"],
                    "info_provider": info["provider"], "kept": "written by %s" % version,
                    "submit": pool["submit"], "job": job, "jobs": jobs, "credits": credits}
        with open(os.path.join(out, "expected.json"), "w") as f:
            json.dump(expected, f, indent=1, sort_keys=True)
            f.write("\n")
        print("fixture of %s in %s" % (version, out))
    finally:
        for p in old.procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
