#!/usr/bin/env python3
"""Training on the pool (issue 38's figures), on this machine, in one run.

  bench/train_pool_bench.py RUNSNACK_BINARY [--rounds 6] [--steps 60] [--samples 4000]

The example CNN on Fashion-MNIST (examples/train; needs python3-torch and
dataset-fashion-mnist: scripts/install-deps --train). Each worker process is
pinned to a core of its own (taskset; the sandboxed script inherits it), so
"W workers" means W cores' worth of the same CPU; the machine's core count
bounds W. Printed:
  - by hand: the script run round after round on one core, --steps steps a
    round, its weights passed on (what one device alone does);
  - the pool with 1 worker, the same rounds and steps: the pool's overhead;
  - the pool with W workers (2 .. cores) at the same total samples a round
    (--steps / W steps each): seconds for the rounds and the last round's loss;
  - bytes each worker moved a round (its session's bytes in + out over the
    rounds after the first) against the weights file's size;
  - the screening's cost (the coordinator's checks) against compute.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples", "train")
PY = "/usr/bin/python3"


class Pool:
    def __init__(self, binary, work, cores):
        self.binary, self.work, self.procs = binary, work, []
        env = dict(os.environ, RUNSNACK_HOME=os.path.join(work, "bank"))
        self.coord = subprocess.Popen([binary, "pool", "serve", "--json", "--listen", "127.0.0.1:0"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.procs.append(self.coord)
        self.ready = json.loads(self.coord.stdout.readline())
        self.events = []
        self.workers = []
        for i, core in enumerate(cores):
            home = os.path.join(work, "w%d" % i)
            p = subprocess.Popen(["taskset", "-c", str(core), binary, "pool", "join", self.ready["join"], "--cpu",
                                  "--price", "36"], env=dict(os.environ, RUNSNACK_HOME=home),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append(p)
            self.workers.append(home)
        self.user = os.path.join(work, "user")
        uid = self.cli(self.user, "id").strip()
        self.cli(os.path.join(work, "bank"), "pool", "grant", uid, "1000")
        time.sleep(2)  # registered and calibrated

    def cli(self, home, *args):
        return subprocess.run([self.binary, *args], env=dict(os.environ, RUNSNACK_HOME=home), check=True,
                              capture_output=True, text=True).stdout

    def stop(self):
        for p in self.procs[1:]:  # the workers first: the coordinator logs their sessions' bytes
            p.terminate()
        for p in self.procs[1:]:
            p.wait()
        time.sleep(0.5)
        self.coord.terminate()
        rest = self.coord.stdout.read()
        self.coord.wait()
        return [json.loads(l) for l in rest.splitlines() if l.startswith("{")]


def by_hand(work, data, init, rounds, steps):
    weights = init
    start = time.monotonic()
    for r in range(rounds):
        out = os.path.join(work, "hand-%d.safetensors" % r)
        env = dict(os.environ, RUNSNACK_WEIGHTS_IN=weights, RUNSNACK_WEIGHTS_OUT=out, RUNSNACK_DATA_DIR=data,
                   RUNSNACK_STEPS=str(steps), RUNSNACK_SEED=str(1000 + r), RUNSNACK_ROUND=str(r))
        done = subprocess.run(["taskset", "-c", "0", PY, os.path.join(EXAMPLES, "fashion_mnist_cnn.py")], env=env,
                              check=True, capture_output=True, text=True)
        loss = json.loads(done.stdout.strip().splitlines()[-1])["loss"]
        weights = out
    return time.monotonic() - start, loss, weights


def on_pool(binary, work, data, init, rounds, steps, workers):
    pool = Pool(binary, os.path.join(work, "pool%d-%d" % (workers, rounds)), list(range(workers)))
    out = os.path.join(work, "run%d-%d" % (workers, rounds))
    start = time.monotonic()
    done = subprocess.run([binary, "pool", "submit", pool.ready["submit"], "train", "--script",
                           os.path.join(EXAMPLES, "fashion_mnist_cnn.py"), "--init", init, "--data", data,
                           "--workers", str(workers), "--rounds", str(rounds), "--local-steps", str(steps),
                           "--budget", "100", "--check-fraction", "0", "--wait", "--json", "--out", out],
                          env=dict(os.environ, RUNSNACK_HOME=pool.user), capture_output=True, text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        sys.exit("the pool's training failed: " + done.stderr)
    lines = [json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")]
    rounds_seen = [l for l in lines if l["event"] == "round"]
    events = pool.stop()
    join_grant = re.search(r"/g/([a-z2-7]+)", pool.ready["join"]).group(1)
    moved = [e["bytes_in"] + e["bytes_out"] for e in events
             if e.get("event") == "session_closed" and e.get("grant") == join_grant]
    return seconds, rounds_seen, out, moved


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--samples", type=int, default=4000)
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    cores = os.cpu_count() or 1
    work = tempfile.mkdtemp(prefix="rs-train-bench-")
    try:
        subprocess.run([PY, os.path.join(EXAMPLES, "prepare_fashion_mnist.py"), "--out", os.path.join(work, "fm"),
                        "--train-samples", str(a.samples), "--test-samples", "2000"], check=True, capture_output=True)
        init = os.path.join(work, "init.safetensors")
        subprocess.run([PY, os.path.join(EXAMPLES, "fashion_mnist_cnn.py"), "--init", init, "--seed", "1"], check=True,
                       capture_output=True)
        data = os.path.join(work, "fm", "train")
        model_bytes = os.path.getsize(init)
        hand_s, hand_loss, _ = by_hand(work, data, init, a.rounds, a.steps)
        print("by hand, 1 core: %d rounds x %d steps in %.1f s, last loss %.3f" % (a.rounds, a.steps, hand_s, hand_loss))
        one_s, one_rounds, _, one_moved = on_pool(binary, work, data, init, a.rounds, a.steps, 1)
        print("pool, 1 worker:  %.1f s (%.2fx by hand), last loss %.3f" % (one_s, one_s / hand_s, one_rounds[-1]["loss"]))
        short_s, _, _, short_moved = on_pool(binary, work, data, init, 1, a.steps, 1)
        if one_moved and short_moved:
            per_round = (max(one_moved) - max(short_moved)) / max(1, a.rounds - 1)
            print("bytes a worker moved a round after the first: %d (%.2fx the %d-byte weights); the first round: %d "
                  "(%.1fx)" % (per_round, per_round / model_bytes, model_bytes, max(short_moved),
                               max(short_moved) / model_bytes))
        for w in range(2, cores + 1):
            s, rounds, _, _ = on_pool(binary, work, data, init, a.rounds, max(1, a.steps // w), w)
            print("pool, %d workers (%d steps each, the same samples a round): %.1f s, %.2fx 1 worker, last loss %.3f"
                  % (w, max(1, a.steps // w), s, one_s / s, rounds[-1]["loss"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
