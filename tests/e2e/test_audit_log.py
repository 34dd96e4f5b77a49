"""`runsnack log` reads like a log (issue 39, item 8): one line per session or command, local time, who, what,
how it ended and what it cost; filters; --json and --events keep every record."""

import datetime
import json
import os
import unittest

from harness import E2ETestCase


class AuditLogView(E2ETestCase):
    def test_a_run_is_two_readable_lines_with_filters(self):
        """On main one `run` wrote 7 lines of 250-330 characters of inline JSON, in UTC, and there were no filters."""
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome, "--allow", "run", "--label", "lab-gpu")
        project = os.path.join(self.tmp, "project")
        os.makedirs(project)
        with open(os.path.join(project, "a.txt"), "w") as f:
            f.write("abc")
        before = datetime.datetime.now(datetime.timezone.utc)
        cp = self.run_cli(chome, "run", "--sync", project, provider.link, "--", "sh", "-c", "echo hi; exit 3",
                          timeout=120)
        self.assertEqual(cp.returncode, 3, cp.stderr)
        after = datetime.datetime.now(datetime.timezone.utc)
        self.ok(chome, "info", provider.link)
        consumer = self.peer_id(chome)

        # Local time: in Tokyo (UTC+9, no DST) each line starts with the Tokyo time of the run.
        tokyo = self.ok(phome, "log", env_extra={"TZ": "Asia/Tokyo"}).stdout.splitlines()
        self.assertTrue(tokyo, tokyo)
        for line in tokyo:
            self.assertNotIn('{"', line)  # no inline JSON
            self.assertLess(len(line), 250, line)
        runs = [l for l in tokyo if "  run  sh -c" in l]
        self.assertEqual(len(runs), 1, tokyo)
        run = runs[0]
        when = datetime.datetime.strptime(run[:19], "%Y-%m-%d %H:%M:%S").replace(
            tzinfo=datetime.timezone(datetime.timedelta(hours=9)))
        self.assertLessEqual(before.replace(microsecond=0) - datetime.timedelta(seconds=1), when)
        self.assertLessEqual(when, after + datetime.timedelta(seconds=1))
        self.assertIn(consumer[:12], run)
        self.assertIn(provider.grant + " (lab-gpu)", run)
        self.assertIn("-> exit 3", run)
        self.assertRegex(run, r"\[[0-9.]+ (s|ms), cpu [0-9.]+ (s|ms), mem [0-9.]+ (bytes|KB|MB)\]")
        sessions = [l for l in tokyo if "  session  " in l]
        self.assertEqual(len(sessions), 2, tokyo)  # the run's and the info's
        self.assertTrue(any("  session  run; sent 1 file, 3 bytes  -> " in l for l in sessions), sessions)
        self.assertTrue(any("  session  info  -> " in l for l in sessions), sessions)
        self.assertTrue(all(" in " in l and " out " in l for l in sessions), sessions)
        self.assertEqual(len(tokyo), 3, tokyo)

        utc = self.ok(phome, "log", "--utc").stdout.splitlines()
        self.assertEqual(len(utc), 3, utc)
        utc_run = next(l for l in utc if "  run  sh -c" in l)
        self.assertEqual(datetime.datetime.strptime(utc_run[:20], "%Y-%m-%d %H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc), when)

        # Filters.
        tomorrow = (datetime.date.today() + datetime.timedelta(days=1)).isoformat()  # a local date
        only_runs = self.ok(phome, "log", "--kind", "run").stdout.splitlines()
        self.assertEqual(len(only_runs), 1, only_runs)
        self.assertEqual(len(self.ok(phome, "log", "--peer", consumer[:8], "--link", provider.grant).stdout.splitlines()), 3)
        self.assertIn("nothing in the audit log that matches", self.ok(phome, "log", "--peer", "zzzz").stdout)
        self.assertIn("nothing", self.ok(phome, "log", "--link", "aaaaaaaaaa").stdout)
        self.assertIn("nothing", self.ok(phome, "log", "--until", "1h").stdout)
        self.assertEqual(len(self.ok(phome, "log", "--since", "1h", "--until", tomorrow).stdout.splitlines()), 3)
        self.fails(phome, "log", "--until", "yesterday", contains="--until")

        # --json: the records themselves, everything, of the lines that matched.
        records = [json.loads(l) for l in self.ok(phome, "log", "--json", "--kind", "run").stdout.splitlines()]
        self.assertEqual([r["kind"] for r in records], ["run_start", "run_end"])
        self.assertEqual(records[1]["detail"]["exit_status"], 3)
        everything = [json.loads(l) for l in self.ok(phome, "log", "--json").stdout.splitlines()]
        self.assertGreaterEqual(len(everything), 10)
        self.assertEqual(len(self.ok(phome, "log", "--events").stdout.splitlines()), len(everything))


if __name__ == "__main__":
    unittest.main()
