#!/usr/bin/env python3
"""Simulates a pool "train" job on this machine, to choose its settings.

    local_sgd_sim.py --workers 4 --rounds 10 --local-steps 50

Splits the training set into W equal contiguous shards (as the pool does) and
runs R rounds. Each round it runs the training script once per shard, as a
pool worker would (a subprocess with the RUNSNACK_* environment variables),
averages the workers' weights, applies DiLoCo's outer step (Nesterov momentum
on the averaged update, as src/pool/training/outer_optimizer.hpp)

    delta = mean(w_i) - w;  v = momentum * v + delta;  w = w + lr * (momentum * v + delta)

and evaluates the new weights on the test set (the script's --evaluate). It
prints one line per round: the round, the workers' mean training loss, the
test accuracy, the round's seconds (all workers, one after another, with
--jobs 1) and the slowest worker's seconds (a round's time on a pool of W
devices, less the transfers).

Data comes from a folder written by prepare_fashion_mnist.py (--data), or else
straight from the Debian package's files (--source).
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import prepare_fashion_mnist  # noqa: E402
import runsnack_train as rs  # noqa: E402


def load(args, split: str, limit):
    if args.data:
        folder = os.path.join(args.data, split)
        images, labels = np.load(os.path.join(folder, "images.npy")), np.load(os.path.join(folder, "labels.npy"))
        return images[:limit], labels[:limit]
    return prepare_fashion_mnist.load_split(args.source, split, limit or prepare_fashion_mnist.MAX_RECORDS)


def write_folder(folder: str, images: np.ndarray, labels: np.ndarray) -> str:
    os.makedirs(folder)
    np.save(os.path.join(folder, "images.npy"), images)
    np.save(os.path.join(folder, "labels.npy"), labels)
    return folder


def last_json_line(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise RuntimeError("the script printed nothing on stdout")
    return json.loads(lines[-1])


def run_script(python: str, script: str, env_extra: dict, threads: int, args=()) -> tuple:
    """(the script's JSON result, seconds) of one run, as a subprocess."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), **env_extra)
    start = time.monotonic()
    done = subprocess.run([python, script, *args], env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"{script} {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return last_json_line(done.stdout), seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4, help="shards, one per simulated device (default 4)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds (default 10)")
    parser.add_argument("--local-steps", type=int, default=50, help="optimizer steps per worker per round (default 50)")
    parser.add_argument("--train-samples", type=int, default=None, help="use the first N training records (default all)")
    parser.add_argument("--test-samples", type=int, default=None, help="evaluate on the first N test records (default all)")
    parser.add_argument("--threads", type=int, default=1, help="threads per script process (default 1)")
    parser.add_argument("--jobs", type=int, default=1, help="script processes at once (default 1)")
    parser.add_argument("--outer-lr", type=float, default=0.7, help="outer learning rate (default 0.7, DiLoCo's)")
    parser.add_argument("--outer-momentum", type=float, default=0.9, help="outer Nesterov momentum (default 0.9)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial weights and of each round")
    parser.add_argument("--target", type=float, default=0.88, help="report the first round at this test accuracy")
    parser.add_argument("--data", help="folder written by prepare_fashion_mnist.py (holding train/ and test/)")
    parser.add_argument("--source", default=prepare_fashion_mnist.DEFAULT_SOURCE, help="idx files, when no --data")
    parser.add_argument("--script", default=os.path.join(HERE, "fashion_mnist_cnn.py"), help="the training script")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the script (default this one)")
    parser.add_argument("--out", help="also save the final weights to this file")
    args = parser.parse_args(argv)
    if min(args.workers, args.rounds, args.local_steps, args.threads, args.jobs) < 1:
        parser.error("--workers, --rounds, --local-steps, --threads and --jobs must be at least 1")

    train_images, train_labels = load(args, "train", args.train_samples)
    test_images, test_labels = load(args, "test", args.test_samples)
    if len(train_labels) < args.workers:
        parser.error(f"{len(train_labels)} training records cannot make {args.workers} shards")

    with tempfile.TemporaryDirectory(prefix="local_sgd_sim.") as tmp:
        # W contiguous shards of equal size (the first len % W one record larger).
        bounds = np.linspace(0, len(train_labels), args.workers + 1).astype(int)
        shards = [write_folder(os.path.join(tmp, f"shard{i}"), train_images[a:b], train_labels[a:b])
                  for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
        test_dir = write_folder(os.path.join(tmp, "test"), test_images, test_labels)
        weights = os.path.join(tmp, "round.safetensors")
        run_script(args.python, args.script, {}, args.threads, ["--init", weights, "--seed", str(args.seed)])
        w = rs.load_weights(weights)
        v = {name: np.zeros_like(t) for name, t in w.items()}

        print(f"# {args.workers} workers x {len(train_labels) // args.workers} records, {args.rounds} rounds x "
              f"{args.local_steps} local steps, {len(test_labels)} test records, {args.threads} thread(s) per process, "
              f"outer lr {args.outer_lr} momentum {args.outer_momentum}", flush=True)
        print("round  loss    accuracy  round_s  slowest_worker_s", flush=True)
        started, reached, best = time.monotonic(), None, (0.0, -1)
        for round_ in range(args.rounds):
            round_start = time.monotonic()

            def worker(i):
                env = {"RUNSNACK_WEIGHTS_IN": weights, "RUNSNACK_WEIGHTS_OUT": os.path.join(tmp, f"out{i}.safetensors"),
                       "RUNSNACK_DATA_DIR": shards[i], "RUNSNACK_STEPS": str(args.local_steps),
                       "RUNSNACK_SEED": str(args.seed * 1_000_003 + round_ * 1_009 + i), "RUNSNACK_ROUND": str(round_)}
                return run_script(args.python, args.script, env, args.threads)

            with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
                results = list(pool.map(worker, range(args.workers)))
            updates = [rs.load_weights(os.path.join(tmp, f"out{i}.safetensors")) for i in range(args.workers)]
            for name in w:  # the outer step, in float64 then back to float32 as the pool keeps them
                delta = np.mean([u[name].astype(np.float64) for u in updates], axis=0) - w[name]
                v[name] = (args.outer_momentum * v[name] + delta).astype(np.float32)
                w[name] = (w[name] + args.outer_lr * (args.outer_momentum * v[name] + delta)).astype(np.float32)
            rs.save_weights(weights, w)

            evaluation, _ = run_script(args.python, args.script, {}, args.threads,
                                       ["--evaluate", weights, "--data", test_dir])
            loss = float(np.mean([result["loss"] for result, _ in results]))
            accuracy = evaluation["accuracy"]
            best = max(best, (accuracy, round_))
            if reached is None and accuracy >= args.target:
                reached = (round_, time.monotonic() - started)
            print(f"{round_:5d}  {loss:.4f}  {accuracy:.4f}    {time.monotonic() - round_start:7.1f}  "
                  f"{max(seconds for _, seconds in results):7.1f}", flush=True)

        total = time.monotonic() - started
        if args.out:
            rs.save_weights(args.out, w)
    steps = args.workers * args.rounds * args.local_steps
    summary = f"# {total:.0f} s in all, {steps} local steps; best accuracy {best[0]:.4f} (round {best[1]})"
    if reached:
        summary += f"; {args.target:.2f} first at round {reached[0]}, after {reached[1]:.0f} s"
    else:
        summary += f"; {args.target:.2f} not reached"
    print(summary, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
