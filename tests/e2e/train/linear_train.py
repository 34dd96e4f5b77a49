"""A training script for the pool's tests: linear regression by SGD on this
device's shard (x.npy, y.npy), in NumPy only, deterministic for a seed.
The contract is examples/train/runsnack_train.py's."""
import os

import numpy as np

import runsnack_train as rs

BATCH = 16
LEARNING_RATE = 0.05

job = rs.contract()
rs.seed_everything(job.seed)
weights = rs.load_weights(job.weights_in)
x = np.load(os.path.join(job.data_dir, "x.npy"))
y = np.load(os.path.join(job.data_dir, "y.npy"))
rng = np.random.default_rng(job.seed)
w, b = weights["w"].astype(np.float64), weights["b"].astype(np.float64)
losses = []
batch = min(BATCH, len(x))
for _ in range(job.steps):
    pick = rng.integers(0, len(x), size=batch)
    err = x[pick] @ w + b - y[pick]
    losses.append(float(np.mean(err ** 2)))
    w -= LEARNING_RATE * 2 * x[pick].T @ err / batch
    b -= LEARNING_RATE * 2 * np.mean(err)
rs.save_weights(job.weights_out, {"w": w.astype(np.float32), "b": b.astype(np.float32).reshape(1)})
rs.report({"loss": float(np.mean(losses)), "samples": job.steps * batch})
