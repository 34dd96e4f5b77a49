"""pool render end to end: tiles path-traced on CPU workers, stitched into one PNG by the submitter."""

import json
import os
import unittest

from test_pool import PoolBase

SCENE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "scenes", "spheres.json")


class PoolRenderTest(PoolBase):
    def render(self, home, out, *args):
        cp = self.run_cli(home, "pool", "submit", self.ready["submit"], "render", "--scene", SCENE, "--wait", "--json",
                          "--out", out, "--width", "96", "--height", "64", "--spp", "4", "--budget", "5", *args,
                          timeout=300)
        lines = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]
        return cp, lines

    def test_tiled_across_workers_equals_the_whole_render(self):
        self.start_pool()
        workers = [self.start_worker("w%d" % i) for i in range(3)]
        user = self.user()
        whole, tiled = os.path.join(self.tmp, "whole.png"), os.path.join(self.tmp, "tiled.png")
        cp, lines = self.render(user, whole, "--tile", "128")  # one tile: the whole image
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual((lines[-1]["state"], lines[-1]["tasks"]), ("done", 1))
        cp, lines = self.render(user, tiled, "--tile", "16", "--overlap", "4")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        done = lines[-1]
        self.assertEqual((done["state"], done["tasks"], done["width"], done["height"]), ("done", 24, 96, 64), done)
        self.assertEqual(done["image"], os.path.abspath(tiled))
        busy = [w for w in workers if any(e.get("event") == "result_accepted" for e in w.events())]
        self.assertGreaterEqual(len(busy), 2, "the tiles should spread over workers")
        with open(whole, "rb") as a, open(tiled, "rb") as b:
            wb, tb = a.read(), b.read()
        self.assertEqual(wb[:8], b"\x89PNG\r\n\x1a\n")
        # Pixels depend only on the scene, the seed and the pixel, and the
        # blend of agreeing tiles is exact: the same pixels, so the same PNG.
        self.assertEqual(wb, tb)
        # A different seed gives a different image (the comparison can fail).
        other = os.path.join(self.tmp, "other.png")
        cp, _ = self.render(user, other, "--tile", "16", "--overlap", "4", "--seed", "2")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        with open(other, "rb") as f:
            self.assertNotEqual(f.read(), wb)
        # The coordinator announced every finished tile for the dashboard's preview.
        tiles = [e for e in self.coord.events() if e.get("event") == "tile_done"]
        self.assertGreaterEqual(len(tiles), 1 + 24)
        self.assertNotIn("png", tiles[0], "the log notes tiles; only the dashboard gets the pixels")

    def test_bad_scene_and_settings_get_clear_errors(self):
        self.start_pool()
        user = self.user()
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w") as f:
            f.write('{"camera": {"position": [0, 0, 0]}, "objects": [{"type": "cube"}]}')
        self.fails(user, "pool", "submit", self.ready["submit"], "render", "--scene", bad, contains="bad.json")
        self.fails(user, "pool", "submit", self.ready["submit"], "render", contains="--scene")
        self.fails(user, "pool", "submit", self.ready["submit"], "render", "--scene", SCENE, "--tile", "4",
                   contains="tile")


if __name__ == "__main__":
    unittest.main()
