"""Helpers for a training script that runs on a RunSnack pool.

Each round the pool runs your script once per device with these environment
variables (read them with ``contract()``):

  RUNSNACK_WEIGHTS_IN   file to start from: this round's weights
  RUNSNACK_WEIGHTS_OUT  file to write: the weights after your local steps
  RUNSNACK_DATA_DIR     folder holding this device's shard of the data
  RUNSNACK_STEPS        how many optimizer steps to take (an integer)
  RUNSNACK_SEED         seed for everything random (an integer); the pool may
                        re-run a round on another device with the same seed
                        and compares the results, so seed every generator
                        (``seed_everything``) and shuffle only with it
  RUNSNACK_ROUND        the round's number, from 0 (an integer)

Weights files are safetensors: named float32 tensors, names sorted. They are
written here by hand (JSON and bytes) so nothing beyond NumPy is needed; the
``safetensors`` package reads them too. PyTorch is imported only by the
functions that take a module. A PyTorch script needs about this much:

    import runsnack_train as rs
    job = rs.contract()
    rs.seed_everything(job.seed)
    model = Net()
    rs.load_into(model, job.weights_in)
    ...train for job.steps steps on the files in job.data_dir...
    rs.state_dict_to_file(model, job.weights_out)
    rs.report({"loss": mean_loss, "samples": job.steps * batch_size})

The last line a script prints on stdout is its round's result: one JSON object
of numbers (``report`` writes it), e.g. {"loss": 0.41, "samples": 3200}.
"""

import json
import os
import random
import struct
from typing import Dict, NamedTuple, Optional

import numpy as np

# The same bounds as the pool's parser (src/pool/training/weights.hpp).
MAX_HEADER_BYTES = 1 << 20
MAX_TENSORS = 4096
MAX_NAME_BYTES = 256
MAX_RANK = 8
MAX_DATA_BYTES = 256 << 20
_METADATA = "__metadata__"


class Contract(NamedTuple):
    weights_in: str
    weights_out: str
    data_dir: str
    steps: int
    seed: int
    round: int


def contract(environ=None) -> Contract:
    """The round's inputs from the environment; a clear error if one is missing."""
    env = os.environ if environ is None else environ

    def get(name):
        if not env.get(name):
            raise SystemExit(f"{name} is not set: this script expects to be run by a RunSnack pool worker")
        return env[name]

    def integer(name):
        try:
            return int(get(name))
        except ValueError:
            raise SystemExit(f"{name} must be an integer, not {env[name]!r}") from None

    return Contract(get("RUNSNACK_WEIGHTS_IN"), get("RUNSNACK_WEIGHTS_OUT"), get("RUNSNACK_DATA_DIR"),
                    integer("RUNSNACK_STEPS"), integer("RUNSNACK_SEED"), integer("RUNSNACK_ROUND"))


def seed_everything(seed: int) -> None:
    """Seeds Python, NumPy and (if imported) PyTorch, and asks PyTorch for
    deterministic kernels, so a re-run of the round on another device agrees."""
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    import sys
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch.manual_seed(seed)
        torch.use_deterministic_algorithms(True, warn_only=True)


def encode_weights(tensors: Dict[str, np.ndarray], metadata: Optional[Dict[str, str]] = None) -> bytes:
    """The file's bytes; equal tensors give equal bytes, as in the pool's writer."""
    if len(tensors) > MAX_TENSORS:
        raise ValueError(f"{len(tensors)} tensors, over the limit of {MAX_TENSORS}")
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        if not name or name == _METADATA or len(name.encode()) > MAX_NAME_BYTES:
            raise ValueError(f"tensor name {name!r} must be 1 to {MAX_NAME_BYTES} bytes and not {_METADATA}")
        array = np.asarray(tensors[name], dtype="<f4")  # not ascontiguousarray: it makes a scalar 1-d
        if array.ndim > MAX_RANK:
            raise ValueError(f"tensor {name!r} has rank {array.ndim}, over the limit of {MAX_RANK}")
        data = array.tobytes()
        header[name] = {"data_offsets": [offset, offset + len(data)], "dtype": "F32", "shape": list(array.shape)}
        chunks.append(data)
        offset += len(data)
    if offset > MAX_DATA_BYTES:
        raise ValueError(f"weights are {offset} bytes, over the limit of {MAX_DATA_BYTES}")
    if metadata:
        header[_METADATA] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-aligned
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def decode_weights(data: bytes):
    """(tensors, metadata) from a file's bytes; ValueError if it is not one."""
    if len(data) < 8:
        raise ValueError("too short for a weights file")
    (size,) = struct.unpack_from("<Q", data)
    if size > MAX_HEADER_BYTES or 8 + size > len(data):
        raise ValueError(f"weights header of {size} bytes does not fit the file")
    header = json.loads(data[8:8 + size])
    body = memoryview(data)[8 + size:]
    metadata = header.pop(_METADATA, {})
    tensors, end = {}, 0
    for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        if entry["dtype"] != "F32":
            raise ValueError(f"tensor {name!r} is {entry['dtype']}: only F32 is supported")
        begin, stop = entry["data_offsets"]
        shape = tuple(entry["shape"])
        if begin != end or stop > len(body) or stop - begin != 4 * int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"tensor {name!r}: data_offsets {entry['data_offsets']} do not fit shape {list(shape)}")
        tensors[name] = np.frombuffer(body[begin:stop], dtype="<f4").astype(np.float32).reshape(shape)
        end = stop
    if end != len(body):
        raise ValueError(f"{len(body) - end} bytes of data belong to no tensor")
    return tensors, metadata


def save_weights(path: str, tensors: Dict[str, np.ndarray], metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes the tensors (converted to float32) to `path`, atomically."""
    data = encode_weights(tensors, metadata)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


def load_weights(path: str) -> Dict[str, np.ndarray]:
    """name -> float32 array, from a file written by save_weights or the pool."""
    with open(path, "rb") as f:
        return decode_weights(f.read())[0]


def state_dict_to_file(module, path: str) -> None:
    """Saves a torch.nn.Module's state dict as float32 (integer buffers such as
    BatchNorm's num_batches_tracked too; load_into casts them back)."""
    import torch
    with torch.no_grad():
        tensors = {name: t.detach().to("cpu", torch.float32).contiguous().numpy() for name, t in module.state_dict().items()}
    save_weights(path, tensors)


def load_into(module, path: str) -> None:
    """Loads a weights file into a torch.nn.Module in place: the same names and
    shapes as its state dict, each cast to the module's own dtype and device."""
    import torch
    loaded = load_weights(path)
    own = module.state_dict()
    missing, extra = sorted(set(own) - set(loaded)), sorted(set(loaded) - set(own))
    if missing or extra:
        raise ValueError(f"{path}: missing tensors {missing}, unexpected tensors {extra}")
    module.load_state_dict({name: torch.from_numpy(loaded[name]).to(own[name].dtype) for name in own}, strict=True)


def report(metrics: Dict[str, float]) -> None:
    """Prints the round's result as one JSON line on stdout, flushed: the last
    line the pool reads. A value that is not a finite number (a NaN loss) is
    written as null, since strict JSON has no NaN."""
    def clean(value):
        if value is None or isinstance(value, (bool, int, str)):
            return value
        value = float(value)  # NumPy and PyTorch scalars too
        return value if np.isfinite(value) else None

    print(json.dumps({str(k): clean(v) for k, v in metrics.items()}, allow_nan=False), flush=True)
