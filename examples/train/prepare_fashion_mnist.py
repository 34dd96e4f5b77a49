#!/usr/bin/env python3
"""Turns Fashion-MNIST's idx files into the data folder a RunSnack pool splits.

    python3 prepare_fashion_mnist.py --out ./fashion-mnist [--train-samples N] [--test-samples N]

writes

    OUT/train/images.npy   uint8, N x 28 x 28
    OUT/train/labels.npy   uint8, N (0..9)
    OUT/test/images.npy    the same for the test set
    OUT/test/labels.npy

The pool cuts OUT/train into one contiguous shard per device; OUT/test is for
evaluating the weights. The source is the Debian package's copy
(apt install dataset-fashion-mnist); nothing is downloaded. Needs only the
standard library and NumPy.
"""

import argparse
import gzip
import os
import struct
import sys

import numpy as np

DEFAULT_SOURCE = "/usr/share/datasets/fashion-mnist"
FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
IMAGE_MAGIC = 0x00000803  # unsigned bytes, 3 dimensions
LABEL_MAGIC = 0x00000801  # unsigned bytes, 1 dimension
SIDE = 28
MAX_RECORDS = 1_000_000  # Fashion-MNIST has 60,000 + 10,000; a header above this is not one of its files
CLASSES = 10


class DataError(Exception):
    pass


def read_idx(path: str, magic: int, dims: int, limit: int) -> np.ndarray:
    """The array of an idx file (gzip-compressed), checked against its header:
    the magic number, the dimensions (N, or N x 28 x 28) and the size of the data.
    Reads at most `limit` records and never more bytes than those need."""
    try:
        return _read_idx(path, magic, dims, limit)
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError; EOFError: cut short
        raise DataError(f"{path}: {e} (a damaged file? reinstall dataset-fashion-mnist)") from None


def _read_idx(path: str, magic: int, dims: int, limit: int) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        head = f.read(4 + 4 * dims)
        if len(head) < 4 + 4 * dims:
            raise DataError(f"{path}: too short for an idx header")
        found, *shape = struct.unpack(f">{1 + dims}I", head)
        if found != magic:
            raise DataError(f"{path}: magic number {found:#010x}, expected {magic:#010x}")
        count = shape[0]
        if count > MAX_RECORDS:
            raise DataError(f"{path}: header says {count} records, over the limit of {MAX_RECORDS}")
        if shape[1:] != [SIDE, SIDE][:dims - 1]:
            raise DataError(f"{path}: records of shape {shape[1:]}, expected {[SIDE, SIDE][:dims - 1]}")
        take = min(count, limit)
        record = SIDE * SIDE if dims == 3 else 1
        data = f.read(take * record)
        if len(data) != take * record:
            raise DataError(f"{path}: {len(data)} bytes of data, the header promises {count * record}")
        if take == count and f.read(1):
            raise DataError(f"{path}: data continues past the {count} records of its header")
    return np.frombuffer(data, dtype=np.uint8).reshape([take] + shape[1:]).copy()


def load_split(source: str, split: str, limit: int):
    images_file, labels_file = FILES[split]
    images = read_idx(os.path.join(source, images_file), IMAGE_MAGIC, 3, limit)
    labels = read_idx(os.path.join(source, labels_file), LABEL_MAGIC, 1, limit)
    if len(images) != len(labels):
        raise DataError(f"{split}: {len(images)} images but {len(labels)} labels")
    if labels.size and labels.max() >= CLASSES:
        raise DataError(f"{split}: label {labels.max()} is not a class 0..{CLASSES - 1}")
    return images, labels


def save(folder: str, images: np.ndarray, labels: np.ndarray) -> None:
    os.makedirs(folder, exist_ok=True)
    for name, array in (("images.npy", images), ("labels.npy", labels)):
        path = os.path.join(folder, name)
        np.save(path + ".tmp.npy", array)
        os.replace(path + ".tmp.npy", path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help=f"folder of the idx .gz files (default {DEFAULT_SOURCE})")
    parser.add_argument("--out", required=True, help="folder to write train/ and test/ into")
    parser.add_argument("--train-samples", type=int, default=None, metavar="N", help="keep the first N training records")
    parser.add_argument("--test-samples", type=int, default=None, metavar="N", help="keep the first N test records")
    args = parser.parse_args(argv)

    for option, value in (("--train-samples", args.train_samples), ("--test-samples", args.test_samples)):
        if value is not None and value < 1:
            parser.error(f"{option} must be at least 1")
    missing = [name for pair in FILES.values() for name in pair if not os.path.isfile(os.path.join(args.source, name))]
    if missing:
        print(f"error: {args.source} lacks {', '.join(missing)}.\n"
              f"Install the dataset with: sudo apt install dataset-fashion-mnist\n"
              f"(or pass --source DIR, a folder holding Fashion-MNIST's four idx .gz files)", file=sys.stderr)
        return 1

    splits = {}
    for split, limit in (("train", args.train_samples), ("test", args.test_samples)):
        try:  # both read and checked before anything is written
            splits[split] = load_split(args.source, split, MAX_RECORDS if limit is None else limit)
        except DataError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        if limit is not None and len(splits[split][0]) < limit:
            print(f"warning: {split} has only {len(splits[split][0])} records, fewer than the {limit} asked for",
                  file=sys.stderr)
    for split, (images, labels) in splits.items():
        folder = os.path.join(args.out, split)
        save(folder, images, labels)
        print(f"{folder}: {len(images)} records, {images.shape[1]}x{images.shape[2]} images, labels 0..{CLASSES - 1}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
