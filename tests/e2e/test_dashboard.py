"""The pool dashboard in a real browser: `pool serve --http`, two CPU workers and an
exec job, watched in headless Debian chromium driven by playwright-core
(tests/browser/dashboard_check.mjs).

Needs `chromium` (apt) and node with tests/browser/node_modules (scripts/install-deps
installs both; this test runs `npm ci` there itself when the folder is missing).
Set RUNSNACK_DASHBOARD_SCREENSHOT=PATH to keep the screenshot (docs/img/dashboard.png
was made so).
"""

import json
import os
import shutil
import subprocess
import threading
import unittest
import urllib.request

from harness import E2ETestCase, READY_DEADLINE, REPO, free_port
from test_pool_pg import PostgresServer, pg_bin_dir

BROWSER_DIR = os.path.join(REPO, "tests", "browser")
HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
SHARDS = 24          # each sleeps SHARD_SECONDS, two workers: the job runs for several seconds
SHARD_SECONDS = "0.6"


def ensure_playwright():
    """tests/browser/node_modules from the pinned package-lock.json, or a reason it cannot be had."""
    if os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
        return None
    if not shutil.which("npm"):
        return "npm is not installed (scripts/install-deps)"
    cp = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=BROWSER_DIR, capture_output=True, text=True,
                        timeout=300)
    return None if cp.returncode == 0 else "npm ci in tests/browser failed: " + cp.stderr[-500:]


def browser_missing():
    """Why headless Chromium cannot be driven here (None when it can): Chromium, node, playwright-core."""
    if not os.access(CHROMIUM, os.X_OK):
        return "no %s: apt-get install chromium (scripts/install-deps)" % CHROMIUM
    if not shutil.which("node"):
        return "no node: apt-get install nodejs npm (scripts/install-deps)"
    return ensure_playwright()


SCENE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "scenes", "spheres.json")


class NodeScript:
    """The browser driver: stdout JSON lines read by a thread."""

    def __init__(self, args):
        self.popen = subprocess.Popen(["node", os.path.join(BROWSER_DIR, "dashboard_check.mjs")] + args,
                                      cwd=BROWSER_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.popen.stdout:
            with self.cond:
                try:
                    self.lines.append(json.loads(line))
                except ValueError:
                    pass
                self.cond.notify_all()

    def wait_stage(self, stage, timeout):
        with self.cond:
            found = self.cond.wait_for(lambda: any(l.get("stage") in (stage, "result") for l in self.lines), timeout)
            return [l for l in self.lines if l.get("stage") in (stage, "result")][0] if found else None

    def finish(self, timeout):
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        self.reader.join(timeout=5)
        stderr = self.popen.stderr.read()
        self.popen.stdout.close()
        self.popen.stderr.close()
        return stderr


class DashboardBrowserTest(E2ETestCase):
    def setUp(self):
        super().setUp()
        why = browser_missing()
        if why:
            self.skipTest(why)

    def test_dashboard_shows_devices_and_live_progress(self):
        port = free_port()
        chome = self.new_home("coordinator")
        coord = self.start(chome, "pool", "serve", "--json", "--listen", "127.0.0.1:0", "--http",
                           "127.0.0.1:%d" % port, name="coordinator")
        ready = coord.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready")
        url = "http://127.0.0.1:%d/" % port
        self.assertEqual(ready["http"], url)

        for name in ("worker-a", "worker-b"):
            home = self.new_home(name)
            w = self.start(home, "pool", "join", ready["join"], "--cpu", name=name)
            w.wait_for(lambda e: e.get("event") == "registered", READY_DEADLINE, "registration of " + name)
        with urllib.request.urlopen(url + "api/snapshot", timeout=10) as r:
            self.assertEqual(r.headers["Content-Type"], "application/json")
            self.assertEqual(len(json.loads(r.read())["devices"]), 2)

        screenshot = os.path.join(self.tmp, "dashboard.png")
        image = os.path.join(self.tmp, "render.png")
        render = {"width": 160, "height": 96, "tile": 32, "image": image}
        browser = NodeScript([url, screenshot, "2", json.dumps(render)])
        try:
            ready_line = browser.wait_stage("ready", 40)
            self.assertIsNotNone(ready_line, "the page did not show the devices")
            self.assertEqual(ready_line["stage"], "ready", ready_line)
            user = self.new_home("user")
            self.ok(chome, "pool", "grant", self.peer_id(user), "100")  # credits are granted explicitly
            sub = self.start(user, "pool", "submit", ready["submit"], "exec", "--shards", str(SHARDS), "--budget",
                             "10", "--wait", "--json", "--out", os.path.join(self.tmp, "out"), "--", "sh", "-c",
                             "sleep %s; echo {shard}" % SHARD_SECONDS, name="submit")
            done = sub.wait_for(lambda e: e.get("event") == "done", 60, "the job to finish")
            self.assertEqual(done["state"], "done", done)
            self.assertIsNotNone(browser.wait_stage("preview-ready", 60), "the preview page did not open")
            rsub = self.start(user, "pool", "submit", ready["submit"], "render", "--scene", SCENE, "--width",
                              str(render["width"]), "--height", str(render["height"]), "--tile", str(render["tile"]),
                              "--overlap", "4", "--spp", "24", "--budget", "10", "--wait", "--json", "--out", image,
                              name="render")
            rdone = rsub.wait_for(lambda e: e.get("event") == "done", 120, "the render job to finish")
            self.assertEqual(rdone["state"], "done", rdone)
            result = browser.wait_stage("result", 60)
        finally:
            stderr = browser.finish(30)
        self.assertIsNotNone(result, "no result from the browser script: " + stderr[-2000:])
        self.assertNotIn("error", result, result.get("error"))

        # The page and its headers
        self.assertEqual(result["page_status"], 200)
        self.assertIn("script-src 'self'", result["csp"])
        self.assertEqual(result["console_errors"], [], "console errors (a CSP violation shows here)")
        self.assertEqual(result["page_errors"], [])
        self.assertEqual(result["connection"], "live")

        # Both devices, online
        self.assertEqual(len(result["devices"]), 2, result["devices"])
        self.assertTrue(all(d["online"] for d in result["devices"]), result["devices"])

        # Progress rose in the page while the job ran, through WebSocket pushes only
        samples = result["samples"]
        dones = [s["done"] for s in samples]
        self.assertEqual(dones, sorted(dones), "done never goes backwards: %r" % samples)
        self.assertGreaterEqual(len(set(d for d in dones if d < SHARDS)), 2,
                                "the page should show the job part-done at least twice: %r" % samples)
        self.assertEqual(samples[-1]["done"], SHARDS, samples)
        self.assertEqual(samples[-1]["state"], "done", samples)
        self.assertNotIn("/api/snapshot", result["requests"], "the page must not poll")
        self.assertGreater(result["ws_events"].get("task_done", 0), 0, result["ws_events"])
        self.assertGreater(result["ws_events"].get("snapshot", 0), 1, result["ws_events"])
        self.assertIn("task_done", result["events_shown"])

        # Work and pay are shown per device; the ledger is listed and audited
        self.assertEqual(sum(d["tasks_done"] for d in result["devices_after"]), SHARDS, result["devices_after"])
        self.assertTrue(any(float(d["earnings"]) > 0 for d in result["devices_after"]), result["devices_after"])
        self.assertGreater(result["ledger_rows"], 0)
        self.assertEqual(result["audit"], "audit OK")

        # The render preview gained tiles as they finished and shows the final image's pixels
        preview = result["preview"]
        self.assertTrue(preview["section_visible"])
        self.assertEqual((preview["width"], preview["height"]), (160, 96))
        self.assertEqual(preview["tiles"], 15)
        self.assertGreaterEqual(len([c for c in preview["counts"] if 0 < c < 15]), 1,
                                "tiles should appear one by one: %r" % preview["counts"])
        self.assertEqual(preview["shown"], preview["expected"])
        self.assertGreater(len(set(map(tuple, preview["shown"]))), 3, "a real image, not a flat colour")

        with open(screenshot, "rb") as f:
            png = f.read()
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        keep = os.environ.get("RUNSNACK_DASHBOARD_SCREENSHOT")
        if keep:
            shutil.copyfile(screenshot, keep)
            shutil.copyfile(screenshot.replace(".png", "-preview.png"), keep.replace(".png", "-render.png"))


class DashboardTrainingTest(E2ETestCase):
    """A training's rounds on the dashboard (issue 38): its row and its loss curve, a point a round."""

    def setUp(self):
        super().setUp()
        why = browser_missing()
        if why:
            self.skipTest(why)
        if subprocess.run(["/usr/bin/python3", "-c", "import numpy"], capture_output=True).returncode != 0:
            self.skipTest("needs Debian's python3-numpy (scripts/install-deps)")

    def test_training_curves(self):
        port = free_port()
        chome = self.new_home("coordinator")
        coord = self.start(chome, "pool", "serve", "--json", "--listen", "127.0.0.1:0", "--http",
                           "127.0.0.1:%d" % port, name="coordinator")
        ready = coord.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready")
        for name in ("worker-a", "worker-b"):
            w = self.start(self.new_home(name), "pool", "join", ready["join"], "--cpu", name=name)
            w.wait_for(lambda e: e.get("event") == "registered", READY_DEADLINE, "registration of " + name)
        user = self.new_home("user")
        self.ok(chome, "pool", "grant", self.peer_id(user), "100")
        root = os.path.join(self.tmp, "training")
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "train", "fixture.py"), "make", root, "600"], check=True)
        cp = self.ok(user, "pool", "submit", ready["submit"], "train", "--script",
                     os.path.join(root, "script", "linear_train.py"), "--init", os.path.join(root, "init.safetensors"),
                     "--data", os.path.join(root, "data"), "--workers", "2", "--rounds", "3", "--local-steps", "10",
                     "--budget", "10", "--check-fraction", "0", "--wait", "--json", "--out",
                     os.path.join(self.tmp, "run"), timeout=240)
        training = json.loads(cp.stdout.splitlines()[0])["training"]
        with urllib.request.urlopen("http://127.0.0.1:%d/api/snapshot" % port, timeout=10) as r:
            snap = [t for t in json.loads(r.read())["trainings"] if t["training"] == training]
        self.assertEqual(len(snap), 1)
        self.assertEqual([c["round"] for c in snap[0]["curve"]], [0, 1, 2])
        browser = subprocess.run(["node", os.path.join(BROWSER_DIR, "training_check.mjs"),
                                  "http://127.0.0.1:%d/" % port, training, "3"], cwd=BROWSER_DIR,
                                 capture_output=True, text=True, timeout=120)
        lines = [json.loads(l) for l in browser.stdout.splitlines() if l.startswith("{")]
        self.assertTrue(lines, browser.stderr[-2000:])
        result = lines[-1]
        self.assertNotIn("error", result, result)
        self.assertTrue(result["section_visible"])
        self.assertEqual((result["rows"], result["rounds"], result["state"]), (1, "3", "done"))
        self.assertEqual(result["loss_points"], 3)
        self.assertIsNone(result["accuracy_points"])  # the script reports no accuracy: no curve drawn for it
        self.assertEqual(result["console_errors"], [])
        self.assertEqual(result["page_errors"], [])


class DashboardSnapshotPostgresTest(E2ETestCase):
    """/api/snapshot's queries on PostgreSQL (the browser test runs on SQLite)."""

    def setUp(self):
        super().setUp()
        bindir = pg_bin_dir()
        if not bindir:
            self.skipTest("PostgreSQL binaries not installed (apt-get install postgresql)")
        self.pg = PostgresServer(bindir)
        self.addCleanup(self.pg.stop)
        self.db = self.pg.start()

    def test_snapshot_on_postgres(self):
        port = free_port()
        chome = self.new_home("coordinator")
        coord = self.start(chome, "pool", "serve", "--json", "--db", self.db, "--listen", "127.0.0.1:0", "--http",
                           "127.0.0.1:%d" % port, name="coordinator")
        ready = coord.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready")
        w = self.start(self.new_home("worker"), "pool", "join", ready["join"], "--cpu", name="worker")
        w.wait_for(lambda e: e.get("event") == "registered", READY_DEADLINE, "registration")
        user = self.new_home("user")
        self.ok(chome, "pool", "grant", self.peer_id(user), "100", "--db", self.db)  # credits are granted explicitly
        cp = self.ok(user, "pool", "submit", ready["submit"], "exec", "--shards", "3", "--budget", "5",
                     "--wait", "--json", "--out", os.path.join(self.tmp, "out"), "--", "echo", "hi")
        self.assertEqual(json.loads(cp.stdout.splitlines()[-1])["state"], "done", cp.stdout)
        with urllib.request.urlopen(ready["http"] + "api/snapshot", timeout=10) as r:
            snap = json.loads(r.read())
        self.assertEqual(len(snap["devices"]), 1, snap)
        self.assertEqual(snap["devices"][0]["tasks_done"], 3)
        self.assertGreater(float(snap["devices"][0]["earnings"]), 0)
        self.assertEqual(snap["devices"][0]["reliability"], 1.0)
        self.assertEqual([(j["state"], j["done"]) for j in snap["jobs"]], [("done", 3)])
        ledger = snap["ledger"]
        self.assertTrue(ledger["audit_ok"], ledger)
        totals = ledger["totals"]
        self.assertEqual((totals["minted"], totals["escrowed"], totals["held"]), ("100", "5", "0"), totals)
        self.assertAlmostEqual(float(totals["paid"]) + float(totals["refunded"]), 5.0, places=6)
        self.assertEqual(ledger["recent"][0]["kind"], "refund")  # newest first


if __name__ == "__main__":
    unittest.main()
