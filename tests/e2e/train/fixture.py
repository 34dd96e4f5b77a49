"""Run with Debian's python3 (NumPy): the linear training's files for the pool's tests.
  fixture.py make DIR N    -> DIR/script/{linear_train.py, runsnack_train.py}, DIR/data/{x,y}.npy, DIR/init.safetensors
  fixture.py error WEIGHTS -> prints the distance of WEIGHTS from the true model"""
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "train"))
import runsnack_train as rs  # noqa: E402

TRUE_W = np.array([1.5, -2.0, 0.5, 3.0])
TRUE_B = 0.25

if sys.argv[1] == "make":
    out, n = sys.argv[2], int(sys.argv[3])
    os.makedirs(os.path.join(out, "script"))
    os.makedirs(os.path.join(out, "data"))
    shutil.copy(os.path.join(HERE, "linear_train.py"), os.path.join(out, "script"))
    shutil.copy(rs.__file__, os.path.join(out, "script"))
    rng = np.random.default_rng(7)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    y = (x @ TRUE_W + TRUE_B + rng.normal(scale=0.01, size=n)).astype(np.float32)
    np.save(os.path.join(out, "data", "x.npy"), x)
    np.save(os.path.join(out, "data", "y.npy"), y)
    rs.save_weights(os.path.join(out, "init.safetensors"), {"w": np.zeros(4, np.float32), "b": np.zeros(1, np.float32)})
elif sys.argv[1] == "error":
    w = rs.load_weights(sys.argv[2])
    print(float(np.sqrt(np.sum((w["w"] - TRUE_W) ** 2) + (w["b"][0] - TRUE_B) ** 2)))
