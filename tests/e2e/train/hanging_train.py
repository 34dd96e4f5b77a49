"""linear_train.py, except that shard 2 hangs in round 1 (a script stuck on one device)."""
import os
import time

if os.environ.get("RUNSNACK_ROUND") == "1" and os.environ.get("RUNSNACK_DATA_DIR", "").endswith("shard-2"):
    time.sleep(90)
import linear_train  # noqa: E402,F401  (runs the round)
