"""Upgrades keep state: what an older runsnack wrote works with this one (issue 21).

tests/upgrade/state-cc629d3/ is the state a runsnack built from cc629d3 left behind, written by
tests/upgrade/make_fixture.py (databases as SQL text): a provider with a live link, a consumer
that used it and wrote a file in its workspace (the single workspace of that version), and a
coordinator whose job a worker finished, the consumer's starting credits in its ledger.
expected.json holds what the old binary itself said. This binary opens that state (its schema
migrations run on first use) and must serve the same link, find the file in the consumer's
"default" workspace, and show the same job and ledger. The package test (tests/package) checks
the same through dpkg's upgrade with the same binary on both sides; upgrade_from_rev.sh does it
with an older binary built for the purpose (15 minutes, so not in `make test`).
"""

import json
import os
import shutil
import sqlite3
import unittest

from harness import E2ETestCase, REPO, Provider, replace_query_param, split_link

FIXTURE = os.path.join(REPO, "tests", "upgrade", "state-cc629d3")


def restore_home(src, dst):
    """The fixture's home as the old version left it: *.sql back into *.db, other files as they are."""
    for dirpath, _, files in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for name in files:
            source, target = os.path.join(dirpath, name), os.path.join(dst, rel, name)
            if name.endswith(".sql"):
                db = sqlite3.connect(target[:-4] + ".db")
                with open(source) as f:
                    db.executescript(f.read())
                db.close()
            else:
                shutil.copy2(source, target)
    os.chmod(os.path.join(dst, "identity.pem"), 0o600)


class UpgradeState(E2ETestCase):
    def setUp(self):
        super().setUp()
        with open(os.path.join(FIXTURE, "expected.json")) as f:
            self.expected = json.load(f)
        self.homes = {}
        for name in ("provider", "consumer", "coordinator"):
            self.homes[name] = os.path.join(self.tmp, name)
            restore_home(os.path.join(FIXTURE, name), self.homes[name])

    def test_the_old_link_and_workspace_still_work(self):
        provider = Provider(self, self.homes["provider"], ["--serve-only", "--no-qr", "--no-port-mapping"])
        self.assertEqual(provider.peer, self.expected["provider"])  # the same identity
        # The same grant and secret, at the port this provider listens on now.
        link = replace_query_param(self.expected["link"], "c", "127.0.0.1:%d" % provider.port)
        info = self.info(self.homes["consumer"], link)
        self.assertEqual(info["provider"], self.expected["info_provider"])
        self.assertEqual(info["grant"]["id"], self.expected["grant"])
        cp = self.ok(self.homes["consumer"], "run", "--no-sync", "--workspace", "default", link, "--", "cat", "kept.txt")
        self.assertEqual(cp.stdout.strip(), self.expected["kept"])  # the old single workspace became "default"
        links = self.links(self.homes["provider"])
        self.assertIn(self.expected["grant"], [l["id"] for l in links])

    def test_an_old_max_uses_link_counts_its_consumers(self):
        """Issue 39: the old version counted connections against --max-uses; this one counts consumers. A link the
        old count had used up (2 connections of 2, both by one consumer) keeps working for that consumer (known
        from the audit log) and lets one more in."""
        db = sqlite3.connect(os.path.join(self.homes["provider"], "runsnack.db"))
        with db:
            db.execute("UPDATE grants SET max_uses = 2 WHERE id = ?", (self.expected["grant"],))
        db.close()
        provider = Provider(self, self.homes["provider"], ["--serve-only", "--no-qr", "--no-port-mapping"])
        link = replace_query_param(self.expected["link"], "c", "127.0.0.1:%d" % provider.port)
        info = self.info(self.homes["consumer"], link)
        self.assertEqual((info["grant"]["uses"], info["grant"]["max_uses"], info["grant"]["connections"]), (1, 2, 3))
        newcomer, late = self.new_home("newcomer"), self.new_home("late")
        self.assertEqual(self.info(newcomer, link)["grant"]["uses"], 2)
        self.fails(late, "info", "--json", link, contains="ask the provider for a new link")
        self.assertEqual(self.info(self.homes["consumer"], link)["grant"]["uses"], 2)

    def test_the_pool_keeps_its_jobs_and_ledger(self):
        serve = self.start(self.homes["coordinator"], "pool", "serve", "--json", "--listen", "127.0.0.1:0",
                           name="coordinator")
        ready = serve.wait_for(lambda e: e.get("event") == "ready", 30, "the coordinator's ready event")
        # The submit link made by the old coordinator: its grant, at the port this one listens on now.
        port = [c for c in split_link(ready["submit"])["c"].split(",") if c.startswith("127.0.0.1:")][0].split(":")[1]
        submit = replace_query_param(self.expected["submit"], "c", "127.0.0.1:" + port)
        jobs = json.loads(self.ok(self.homes["consumer"], "pool", "jobs", "--json", submit).stdout)
        old_job = self.expected["jobs"]["jobs"][0]
        job = [j for j in jobs["jobs"] if j["job"] == self.expected["job"]]
        self.assertEqual(len(job), 1, jobs)
        for key in ("state", "tasks", "done", "failed", "workload", "owner", "credits_spent"):
            self.assertEqual(job[0][key], old_job[key], key)
        credits = json.loads(self.ok(self.homes["consumer"], "pool", "credits", "--json", submit).stdout)
        self.assertEqual(credits["balance"], self.expected["credits"]["balance"])
        self.assertEqual([(e["kind"], e["amount"]) for e in credits["entries"]],
                         [(e["kind"], e["amount"]) for e in self.expected["credits"]["entries"]])
        audit = self.run_cli(self.homes["coordinator"], "pool", "audit-ledger", "--json")
        self.assertEqual(audit.returncode, 0, audit.stdout + audit.stderr)


if __name__ == "__main__":
    unittest.main()
