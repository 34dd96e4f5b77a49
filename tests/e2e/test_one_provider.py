"""One provider per machine (issue 39, item 9): a second `share` while one runs makes its link on the running one,
as `tailscale serve` and ngrok attach to their one agent, instead of binding another port whose link dies with
that terminal; `links` says where each link is served."""

import json
import subprocess
import unittest

from harness import E2ETestCase


class OneProvider(E2ETestCase):
    def test_a_second_share_makes_its_link_on_the_running_one(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        first = self.start_provider(phome, "--allow", "run")
        port = first.link.split("/c/")[1].split("/")[0].split(",")[0].rsplit(":", 1)[1]
        try:
            # On main this bound a port of its own and served until its terminal closed: it never returned.
            cp = self.run_cli(phome, "share", "--json", "--allow", "run", "--label", "second", "--no-qr",
                              "--listen", "127.0.0.1:0", timeout=30)
        except subprocess.TimeoutExpired:
            self.fail("the second share did not hand its link to the running one: it kept serving on its own")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertIn("--listen ignored: the share already running here (pid %d)" % first.pid, cp.stderr)
        ready = json.loads(cp.stdout.splitlines()[-1])
        self.assertEqual(ready["served_by"], first.pid)
        link = ready["link"]
        self.assertNotEqual(link, first.link)
        # Its address is the running share's, and the running share serves it.
        self.assertIn(":" + port, link.split("/c/")[1].split("/")[0])
        run = self.run_cli(chome, "run", "--no-sync", link, "--", "echo", "through the first")
        self.assertEqual((run.returncode, run.stdout.strip()), (0, "through the first"), run.stderr)

        # `links`: both, served by the running share; --json says by which.
        rows = json.loads(self.ok(phome, "links", "--json").stdout)
        self.assertEqual(sorted(r["id"] for r in rows), sorted([first.grant, ready["grant"]]))
        self.assertTrue(all(r["served_by"] == {"pid": first.pid, "listen": "127.0.0.1:" + port} for r in rows), rows)
        self.assertIn("served by `runsnack share` (pid %d)" % first.pid, self.ok(phome, "links").stdout)
        # --serve-only beside it has nothing to do.
        cp = self.run_cli(phome, "share", "--serve-only", timeout=30)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertIn("already served by the share already running here (pid %d)" % first.pid, cp.stderr)
        self.assertEqual(len(json.loads(self.ok(phome, "links", "--json").stdout)), 2)  # and made no link
        first.stop()
        first.wait(20)
        # Once it stopped: no one serves them, and `links` says so.
        self.assertTrue(all(r["served_by"] is None for r in json.loads(self.ok(phome, "links", "--json").stdout)))
        self.assertIn("not served now", self.ok(phome, "links").stdout)
        # The next share serves this state again: a link made with it is its own.
        again = self.start_provider(phome, "--allow", "run")
        rows = json.loads(self.ok(phome, "links", "--json").stdout)
        self.assertTrue(all(r["served_by"]["pid"] == again.pid for r in rows), rows)


if __name__ == "__main__":
    unittest.main()
