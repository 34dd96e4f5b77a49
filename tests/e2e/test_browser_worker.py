"""A browser tab as a pool worker (issue 19, docs/BROWSER-WORKERS.md): headless Debian chromium with WebGPU on
SwiftShader opens the coordinator's browser join link (/join#GRANT:SECRET on the `pool serve --http` port) and
computes seeded matmul tiles with a WGSL kernel next to a native CPU worker. Driven by
tests/browser/worker_check.mjs, which relays the page's /worker WebSocket and tampers with its first result.

Needs `chromium` (apt) and node with tests/browser/node_modules (scripts/install-deps); skipped with the reason
when they are missing.
"""

import json
import os
import subprocess
import threading
import unittest

from harness import READY_DEADLINE
from test_dashboard import BROWSER_DIR, browser_missing
from test_pool import PoolBase
from test_pool_matmul import read_npy
from ws_client import WsClient

SCENE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "scenes", "spheres.json")


class PageDriver:
    """worker_check.mjs: one command per stdin line, one JSON line per answer on stdout."""

    def __init__(self, url, kind="webgpu", *args):
        self.popen = subprocess.Popen(["node", os.path.join(BROWSER_DIR, "worker_check.mjs"), url, kind, *args],
                                      cwd=BROWSER_DIR,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.popen.stdout:
            with self.cond:
                try:
                    self.lines.append(json.loads(line))
                except ValueError:
                    pass
                self.cond.notify_all()

    def wait_stage(self, stages, timeout):
        """The first line at one of `stages` not seen before (consumed), or None."""
        with self.cond:
            self.cond.wait_for(lambda: any(l.get("stage") in stages for l in self.lines), timeout)
            for i, l in enumerate(self.lines):
                if l.get("stage") in stages:
                    return self.lines.pop(i)
            return None

    def command(self, cmd, timeout=90):
        self.popen.stdin.write(cmd + "\n")
        self.popen.stdin.flush()
        return self.wait_stage((cmd,), timeout)

    def finish(self):
        try:
            self.command("quit", 30)
            self.popen.stdin.close()
            self.popen.wait(timeout=30)
        except (subprocess.TimeoutExpired, OSError, ValueError):
            self.popen.kill()
            self.popen.wait()
        err = self.popen.stderr.read()
        self.popen.stdout.close()
        self.popen.stderr.close()
        return err


class BrowserWorkerTest(PoolBase):
    def setUp(self):
        super().setUp()
        why = browser_missing()
        if why:
            self.skipTest(why)

    def matmul(self, user, out, name):
        return self.start(user, "pool", "submit", self.ready["submit"], "matmul", "--n", "256", "--block", "32",
                          "--seed", "11", "--budget", "50", "--wait", "--json", "--out", out, name=name)

    def test_browser_computes_verified_tiles_beside_a_cpu_worker(self):
        self.chome = self.new_home("coordinator")
        self.coord = self.start(self.chome, "pool", "serve", "--json", "--listen", "127.0.0.1:0", "--http",
                                "127.0.0.1:0", name="coordinator")
        self.ready = self.coord.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready")
        link = self.ready["browser_join"]
        self.assertRegex(link, r"^http://127\.0\.0\.1:\d+/join#[A-Za-z0-9]+:[A-Za-z0-9]+$")

        page = PageDriver(link)
        try:
            reg = page.wait_stage(("registered", "failed"), 90)
            self.assertIsNotNone(reg, "the page never answered")
            self.assertEqual(reg["stage"], "registered", reg)
            self.assertTrue(reg["device"].endswith("/webgpu"), reg)

            # The browser alone first (so it surely gets tiles), then a native CPU worker joins. An older
            # command job waits meanwhile: the browser cannot run it and must not be handed it (routing by
            # what a device runs, device_runs.hpp), so it never reports a task as failed.
            user = self.user()
            exec_job = self.start(user, "pool", "submit", self.ready["submit"], "exec", "--shards", "2", "--budget", "5",
                                  "--wait", "--json", "--out", os.path.join(self.tmp, "out-exec"), "--", "echo", "hi",
                                  name="exec-job")
            exec_job.wait_for(lambda e: e.get("event") == "submitted", 60, "the command job's submission")
            out1 = os.path.join(self.tmp, "out1")
            job1 = self.matmul(user, out1, "job1")
            self.poll_until(lambda: (lambda s: s["accepted"] >= 2 and s["tampered"])(page.command("status")), 120,
                            "the browser's accepted tiles")
            worker = self.start_worker("cpu-worker")
            done1 = job1.wait_for(lambda e: e.get("event") == "done", 240, "job 1")
            self.assertEqual(done1["state"], "done", done1)
            after1 = page.command("status")
            self.assertEqual(after1["sent"].get("failed", 0), 0, "the browser was handed a task it cannot run")
            done_exec = exec_job.wait_for(lambda e: e.get("event") == "done", 240, "the command job")
            self.assertEqual(done_exec["state"], "done", done_exec)

            # The tile tampered on the wire was refused; the untouched ones passed verification (Freivalds).
            self.assertEqual(len(after1["rejected"]), 1, after1)
            self.assertIn("signature does not verify", after1["rejected"][0])
            self.assertGreaterEqual(after1["accepted"], 2)
            self.assertEqual(after1["done"], after1["accepted"], "the page counts what the coordinator accepted")
            self.assertGreater(float(after1["earned"].split()[0]), 0)
            self.assertTrue(any(e.get("event") == "result_accepted" for e in worker.events()), "the CPU worker ran none")
            self.assertEqual(done1["verification"]["checked"], 64, done1)
            self.assertEqual(after1["errors"], [], "page errors")

            status = self.pool_status(user)
            browsers = [d for d in status["devices"] if d["kind"] == "webgpu"]
            self.assertEqual(len(browsers), 1, status["devices"])
            self.assertGreaterEqual(browsers[0]["valid"], after1["accepted"])
            self.assertTrue(browsers[0]["online"])

            # Paused: no claims while a second job of the same seed runs on the CPU worker alone.
            paused = page.command("pause")
            self.assertEqual(paused["state"], "paused", paused)
            claims = paused["sent"].get("claim", 0)
            out2 = os.path.join(self.tmp, "out2")
            done2 = self.matmul(self.user("user2"), out2, "job2").wait_for(lambda e: e.get("event") == "done", 240, "job 2")
            self.assertEqual(done2["state"], "done", done2)
            still = page.command("status")
            self.assertEqual(still["sent"].get("claim", 0), claims, "the paused page claimed")
            self.assertEqual(still["done"], after1["done"])
            self.assertEqual(still["state"], "paused")

            # The product with browser tiles equals the CPU-only one (seeded entries: exact in float32).
            _, _, c1 = read_npy(os.path.join(out1, "C.npy"))
            _, _, c2 = read_npy(os.path.join(out2, "C.npy"))
            self.assertEqual(len(c1), 256 * 256)
            self.assertEqual(c1, c2)
            self.audit_ok()
        finally:
            err = page.finish()
            if "Error" in err:
                print("worker_check.mjs stderr:", err[-3000:])


class BrowserWasmFallbackTest(PoolBase):
    """WebGPU off (no --enable-unsafe-webgpu: no adapter): the page falls back to the WebAssembly build of the
    native kernels (src/pool/wasm/), registers as kind wasm, says why, and computes matmul AND render tiles that
    the coordinator verifies like any device's."""

    def setUp(self):
        super().setUp()
        why = browser_missing()
        if why:
            self.skipTest(why)

    def test_wasm_page_computes_verified_matmul_and_render_tiles(self):
        self.chome = self.new_home("coordinator")
        self.coord = self.start(self.chome, "pool", "serve", "--json", "--listen", "127.0.0.1:0", "--http",
                                "127.0.0.1:0", name="coordinator")
        self.ready = self.coord.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready")
        page = PageDriver(self.ready["browser_join"], "wasm")
        try:
            reg = page.wait_stage(("registered", "failed"), 90)
            self.assertIsNotNone(reg, "the page never answered")
            self.assertEqual(reg["stage"], "registered", reg)
            self.assertTrue(reg["device"].endswith("/wasm"), reg)
            # The page says why it is not on WebGPU.
            self.assertIn("running on WebAssembly", reg["backend"])
            self.assertIn("WebGPU", reg["backend"])

            # The browser alone first, with a render job and a matmul job, until it has tiles of both accepted.
            user = self.user()
            out_render = os.path.join(self.tmp, "render.png")
            render = self.start(user, "pool", "submit", self.ready["submit"], "render", "--scene", SCENE, "--width", "96",
                                "--height", "64", "--spp", "4", "--tile", "16", "--overlap", "4", "--budget", "20",
                                "--wait", "--json", "--out", out_render, name="render-job")
            out_matmul = os.path.join(self.tmp, "matmul")
            matmul = self.start(user, "pool", "submit", self.ready["submit"], "matmul", "--n", "256", "--block", "32",
                                "--seed", "11", "--budget", "50", "--wait", "--json", "--out", out_matmul, name="matmul-job")
            self.poll_until(lambda: (lambda f: f.get("tile.bin", 0) >= 2 and f.get("tile.f32", 0) >= 2)(
                page.command("status")["accepted_files"]), 240, "the browser's accepted render and matmul tiles")
            worker = self.start_worker("cpu-worker")
            done_render = render.wait_for(lambda e: e.get("event") == "done", 300, "the render job")
            done_matmul = matmul.wait_for(lambda e: e.get("event") == "done", 300, "the matmul job")
            self.assertEqual(done_render["state"], "done", done_render)
            self.assertEqual(done_matmul["state"], "done", done_matmul)
            after = page.command("status")

            # The tampered first result was refused; the others passed verification (spot checks, Freivalds).
            self.assertEqual(len(after["rejected"]), 1, after)
            self.assertEqual(after["done"], after["accepted"], "the page counts what the coordinator accepted")
            self.assertGreaterEqual(done_render["tiles_by_device"].get("wasm", 0), 2, done_render)
            self.assertEqual(done_render["verification"]["checked"], 24, done_render)
            self.assertEqual(done_matmul["verification"]["checked"], 64, done_matmul)
            self.assertGreater(float(after["earned"].split()[0]), 0)
            self.assertEqual(after["errors"], [], "page errors")
            self.assertIsNotNone(worker)

            status = self.pool_status(user)
            browsers = [d for d in status["devices"] if d["kind"] == "wasm"]
            self.assertEqual(len(browsers), 1, status["devices"])
            self.assertGreaterEqual(browsers[0]["valid"], after["accepted"])
            self.assertTrue(browsers[0]["online"])
            with open(out_render, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertEqual(len(read_npy(os.path.join(out_matmul, "C.npy"))[2]), 256 * 256)
            self.audit_ok()
        finally:
            err = page.finish()
            if "Error" in err:
                print("worker_check.mjs stderr:", err[-3000:])


class BrowserWorkerHostileTest(PoolBase):
    """Attacks on the /worker socket by a client speaking its real protocol (no browser needed)."""

    def setUp(self):
        super().setUp()
        self.chome = self.new_home("coordinator")
        self.coord = self.start(self.chome, "pool", "serve", "--json", "--listen", "127.0.0.1:0", "--http",
                                "127.0.0.1:0", name="coordinator")
        self.ready = self.coord.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready")
        self.port = int(self.ready["http"].rsplit(":", 1)[1].strip("/"))
        self.grant_id = self.ready["browser_join"].split("#")[1].split(":")[0]

    def challenged(self, **kw):
        ws = WsClient(self.port, **kw)
        self.assertEqual(ws.status, 101)
        challenge = json.loads(ws.recv_text())
        self.assertEqual(challenge["op"], "challenge")
        self.assertEqual(len(challenge["nonce"]), 64)
        return ws

    def test_a_wrong_proof_is_refused_and_the_socket_closed(self):
        ws = self.challenged()
        ws.send_text(json.dumps({"op": "auth", "grant": self.grant_id, "public_key": "ab" * 32, "proof": "cd" * 32,
                                 "signature": "ef" * 64}))
        answer = json.loads(ws.recv_text())
        self.assertFalse(answer["ok"])
        self.assertIn("proof does not verify", answer["error"])
        self.assertIsNone(ws.recv_text(), "the socket stays open after a refusal")
        ws.close()
        ws2 = self.challenged()
        ws2.send_text(json.dumps({"op": "claim"}))  # no auth first
        self.assertFalse(json.loads(ws2.recv_text())["ok"])
        self.assertIsNone(ws2.recv_text())
        ws2.close()

    def test_sockets_per_address_are_capped(self):
        held = [self.challenged() for _ in range(4)]
        extra = WsClient(self.port)
        self.assertEqual(extra.status, 503)
        extra.close()
        held[0].close()
        # A socket closed frees its place (the server notices the close, then the next one is let in).
        self.poll_until(lambda: self.upgrade_status() == 101, 30, "a place after a close")
        for ws in held[1:]:
            ws.close()

    def upgrade_status(self, **kw):
        ws = WsClient(self.port, **kw)
        ws.close()
        return ws.status

    def test_another_origin_is_refused(self):
        self.assertEqual(self.upgrade_status(origin="http://evil.example"), 403)

    def test_a_huge_auth_message_is_refused_unread(self):
        ws = self.challenged()
        ws.send_frame_header(64 * 1024 * 1024)  # announces 64 MiB, sends none of it
        self.assertIsNone(ws.recv_text(), "the server waited for 64 MiB instead of closing")
        ws.close()

    def test_a_silent_page_is_closed_after_the_auth_deadline(self):
        ws = self.challenged()
        self.assertIsNone(ws.recv_text())  # closed by the server (10 s), before the client's 30 s timeout
        ws.close()


if __name__ == "__main__":
    unittest.main()
