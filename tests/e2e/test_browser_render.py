"""Render tiles from a browser tab (issue 19, docs/BROWSER-WORKERS.md): headless Debian chromium with WebGPU on
SwiftShader runs the WGSL port of the path tracer (src/pool/dashboard/www/render_webgpu*.js) next to a native CPU
worker. The job completes with tiles from both, the browser's tiles pass the coordinator's pixel spot check, the
stitched PNG matches a CPU-only render of the same scene and seed within the render tolerance, and a tile whose
pixels a dishonest browser owner altered and signed with the browser's own key is rejected by that check.

Driven by tests/browser/worker_check.mjs --resign-pixels. Needs `chromium` (apt) and node with
tests/browser/node_modules (scripts/install-deps); skipped with the reason when they are missing.
"""

import os
import struct
import unittest
import zlib

from harness import READY_DEADLINE
from test_browser_worker import PageDriver
from test_dashboard import browser_missing
from test_pool import PoolBase

SCENE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "scenes", "spheres.json")
TOLERANCE = 2  # levels per channel, as render/spot_check.hpp SpotCheckRules
ALLOWED_FRACTION = 1 / 16  # the spot check lets 1 of 16 checked pixels differ by more


def read_png(path):
    """(width, height, rgb bytes) of an 8-bit RGB PNG (what render/png_codec.cpp writes), any row filters."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    at, idat, w, h = 8, b"", 0, 0
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color) == (8, 2), (depth, color)
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    raw, stride, out = zlib.decompress(idat), 3 * w, bytearray()
    prev = bytearray(stride)
    for y in range(h):
        kind, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = row[i - 3] if i >= 3 else 0
            b, c = prev[i], (prev[i - 3] if i >= 3 else 0)
            if kind == 1:
                row[i] = (row[i] + a) & 255
            elif kind == 2:
                row[i] = (row[i] + b) & 255
            elif kind == 3:
                row[i] = (row[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += row
        prev = row
    return w, h, bytes(out)


def differing_pixels(a, b):
    """Pixels of two same-sized images where a channel differs by more than TOLERANCE."""
    assert len(a) == len(b)
    return sum(1 for i in range(0, len(a), 3) if max(abs(a[i + c] - b[i + c]) for c in range(3)) > TOLERANCE)


class BrowserRenderTest(PoolBase):
    def setUp(self):
        super().setUp()
        why = browser_missing()
        if why:
            self.skipTest(why)

    def render(self, user, out, name, seed="1"):
        return self.start(user, "pool", "submit", self.ready["submit"], "render", "--scene", SCENE, "--width", "96",
                          "--height", "64", "--spp", "4", "--tile", "16", "--overlap", "4", "--seed", seed,
                          "--budget", "20", "--wait", "--json", "--out", out, name=name)

    def test_browser_render_tiles_verify_and_match_the_cpu_render(self):
        self.chome = self.new_home("coordinator")
        self.coord = self.start(self.chome, "pool", "serve", "--json", "--listen", "127.0.0.1:0", "--http",
                                "127.0.0.1:0", name="coordinator")
        self.ready = self.coord.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready")
        page = PageDriver(self.ready["browser_join"], "webgpu", "--resign-pixels")
        try:
            reg = page.wait_stage(("registered", "failed"), 90)
            self.assertIsNotNone(reg, "the page never answered")
            self.assertEqual(reg["stage"], "registered", reg)

            # The browser alone first: its first tile (re-signed unchanged by the relay) and its second (pixels
            # inverted, signed with its key); then a CPU worker joins.
            user = self.user()
            mixed = os.path.join(self.tmp, "mixed.png")
            job = self.render(user, mixed, "job-mixed")
            self.poll_until(lambda: (lambda s: s["accepted"] >= 1 and s["tampered"] and s["rejected"])(
                page.command("status")), 240, "the browser's first two render results")
            worker = self.start_worker("cpu-worker")
            done = job.wait_for(lambda e: e.get("event") == "done", 300, "the mixed render")
            self.assertEqual(done["state"], "done", done)
            seen = page.command("status")
            self.assertEqual(seen["errors"], [], "page or relay errors")

            # Tiles from both devices, and the browser's passed the pixel spot check.
            by_device = done["tiles_by_device"]
            self.assertGreater(by_device.get("webgpu", 0), 0, done)
            self.assertGreater(by_device.get("cpu", 0), 0, done)
            self.assertEqual(sum(by_device.values()), 24, done)
            self.assertGreaterEqual(seen["accepted"], by_device["webgpu"])
            self.assertEqual(seen["done"], seen["accepted"])
            self.assertEqual(seen["sent"].get("failed", 0), 0, "the page handed a render task back")
            self.assertTrue(any(e.get("event") == "result_accepted" for e in worker.events()), "the CPU worker ran none")

            # The re-signed altered tile: signature fine, pixels not (the control before it was accepted).
            self.assertEqual(len(seen["rejected"]), 1, seen)
            self.assertIn("differ from the coordinator's render", seen["rejected"][0])

            browsers = [d for d in self.pool_status(user)["devices"] if d["kind"] == "webgpu"]
            self.assertEqual(len(browsers), 1)
            self.assertGreaterEqual(browsers[0]["valid"], 1)

            # The same scene and seed on the CPU alone (the browser paused), then another seed as a control.
            self.assertEqual(page.command("pause")["state"], "paused")
            cpu_only = os.path.join(self.tmp, "cpu.png")
            done_cpu = self.render(self.user("user2"), cpu_only, "job-cpu").wait_for(
                lambda e: e.get("event") == "done", 300, "the CPU-only render")
            self.assertEqual(done_cpu["tiles_by_device"], {"cpu": 24}, done_cpu)
            other = os.path.join(self.tmp, "other.png")
            done_other = self.render(self.user("user3"), other, "job-other", seed="2").wait_for(
                lambda e: e.get("event") == "done", 300, "the other seed")
            self.assertEqual(done_other["state"], "done", done_other)

            w, h, browser_rgb = read_png(mixed)
            self.assertEqual((w, h), (96, 64))
            _, _, cpu_rgb = read_png(cpu_only)
            _, _, other_rgb = read_png(other)
            allowed = int(ALLOWED_FRACTION * w * h)
            print("tiles by device:", by_device, "rejected:", seen["rejected"])
            off = differing_pixels(browser_rgb, cpu_rgb)
            print("browser+cpu vs cpu-only: %d of %d pixels differ by more than %d levels" % (off, w * h, TOLERANCE))
            self.assertLessEqual(off, allowed)
            self.assertGreater(differing_pixels(other_rgb, cpu_rgb), allowed, "another seed should not pass")
            self.audit_ok()
        finally:
            err = page.finish()
            if "Error" in err:
                print("worker_check.mjs stderr:", err[-3000:])


if __name__ == "__main__":
    unittest.main()
