#!/usr/bin/env python3
"""A small CNN on Fashion-MNIST, trained by a RunSnack pool (see README.md).

Three ways to run it:

  fashion_mnist_cnn.py                      one round, as the pool runs it: the
                                            RUNSNACK_* environment variables say
                                            what to read, how long to train and
                                            where to write (runsnack_train.py)
  fashion_mnist_cnn.py --init FILE [--seed S]
                                            writes the untrained weights, the
                                            job's starting point
  fashion_mnist_cnn.py --evaluate FILE --data DIR
                                            prints {"accuracy": .., "loss": ..}
                                            of the weights on DIR's records

A data folder holds images.npy (uint8, N x 28 x 28) and labels.npy (uint8, N),
as prepare_fashion_mnist.py writes them. Optional environment variables:
RUNSNACK_BATCH (default 64), RUNSNACK_EVAL_DIR (a data folder to report the
accuracy on after the round).
"""

import argparse
import os
import sys

# Deterministic cuBLAS needs this before CUDA starts; harmless without CUDA.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runsnack_train as rs  # noqa: E402  (lies next to this script)

LEARNING_RATE = 1e-3
MEAN, STD = 0.2860, 0.3530  # of Fashion-MNIST's training pixels, scaled to [0, 1]


class Net(nn.Module):
    """Two 5x5 convolutions with max pooling and one linear layer: 28,938 weights."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2)  # 28x28 -> pooled 14x14
        self.conv2 = nn.Conv2d(16, 32, 5, padding=2)  # 14x14 -> pooled 7x7
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def make_deterministic() -> None:
    """The same seed gives the same weights on the same hardware; on other
    hardware only float rounding differs (the pool's re-run check allows for it)."""
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False  # full float32, as on a CPU
    torch.backends.cuda.matmul.allow_tf32 = False


def load_data(folder: str):
    """(images, labels) of a data folder as CPU tensors: uint8 N x 1 x 28 x 28 and int64 N."""
    try:
        images, labels = np.load(os.path.join(folder, "images.npy")), np.load(os.path.join(folder, "labels.npy"))
    except OSError as e:
        raise SystemExit(f"{folder}: {e}; a data folder holds images.npy and labels.npy (prepare_fashion_mnist.py)")
    if (images.dtype != np.uint8 or images.shape[1:] != (28, 28) or images.ndim != 3
            or not np.issubdtype(labels.dtype, np.integer) or labels.shape != images.shape[:1]):
        raise SystemExit(f"{folder}: expected uint8 images N x 28 x 28 and N integer labels, "
                         f"got {images.dtype} {images.shape} and {labels.dtype} {labels.shape}")
    if len(labels) == 0:
        raise SystemExit(f"{folder}: no records")
    if labels.min() < 0 or labels.max() > 9:
        raise SystemExit(f"{folder}: labels must be 0..9")
    return torch.from_numpy(images).unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


def prepare(images: torch.Tensor) -> torch.Tensor:
    """uint8 pixels -> normalized float32, on the model's device."""
    return (images.to(device(), torch.float32) / 255 - MEAN) / STD


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy, written out with a one-hot mask: CUDA's NLLLoss has no
    deterministic kernel in older PyTorch (use_deterministic_algorithms refuses it)."""
    one_hot = labels[:, None] == torch.arange(logits.shape[1], device=logits.device)
    return -(F.log_softmax(logits, dim=1) * one_hot).sum(dim=1).mean()


def batches(count: int, batch: int, steps: int, generator: torch.Generator):
    """`steps` batches of `batch` record indices: the shard in an order shuffled
    by `generator`, reshuffled each time it runs out (so a shard smaller than a
    batch is repeated within it)."""
    order, used = torch.empty(0, dtype=torch.int64), 0
    for _ in range(steps):
        while len(order) - used < batch:
            order = torch.cat([order[used:], torch.randperm(count, generator=generator)])
            used = 0
        yield order[used:used + batch]
        used += batch


@torch.no_grad()
def evaluate(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> dict:
    model.eval()
    correct, loss = 0, 0.0
    for start in range(0, len(labels), 1000):
        x, y = prepare(images[start:start + 1000]), labels[start:start + 1000].to(device())
        logits = model(x)
        loss += cross_entropy(logits, y).item() * len(y)
        correct += (logits.argmax(dim=1) == y).sum().item()
    return {"accuracy": correct / len(labels), "loss": loss / len(labels)}


def batch_size() -> int:
    text = os.environ.get("RUNSNACK_BATCH") or "64"
    if not text.isdigit() or int(text) < 1:
        raise SystemExit(f"RUNSNACK_BATCH must be a positive integer, not {text!r}")
    return int(text)


def train_round() -> dict:
    job = rs.contract()  # the RUNSNACK_* variables
    batch = batch_size()
    rs.seed_everything(job.seed)
    make_deterministic()
    generator = torch.Generator().manual_seed(job.seed)  # the only source of the batches' order

    model = Net()
    rs.load_into(model, job.weights_in)
    model.to(device()).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    images, labels = load_data(job.data_dir)

    total = 0.0
    for index in batches(len(labels), batch, job.steps, generator):
        loss = cross_entropy(model(prepare(images[index])), labels[index].to(device()))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()

    rs.state_dict_to_file(model, job.weights_out)
    result = {"loss": total / max(job.steps, 1), "samples": job.steps * batch}
    eval_dir = os.environ.get("RUNSNACK_EVAL_DIR")
    if eval_dir and os.path.isfile(os.path.join(eval_dir, "images.npy")):
        result["accuracy"] = evaluate(model, *load_data(eval_dir))["accuracy"]
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="A small CNN on Fashion-MNIST for a RunSnack pool.")
    parser.add_argument("--init", metavar="FILE", help="write the untrained weights to FILE and exit")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial weights (with --init)")
    parser.add_argument("--evaluate", metavar="FILE", help="print the accuracy and loss of the weights in FILE")
    parser.add_argument("--data", metavar="DIR", help="data folder to evaluate on (with --evaluate)")
    args = parser.parse_args(argv)

    if args.init:
        torch.manual_seed(args.seed)
        model = Net()
        rs.state_dict_to_file(model, args.init)
        result = {"parameters": sum(p.numel() for p in model.parameters())}
    elif args.evaluate:
        if not args.data:
            parser.error("--evaluate needs --data DIR")
        model = Net()
        rs.load_into(model, args.evaluate)
        result = evaluate(model.to(device()), *load_data(args.data))
    else:
        result = train_round()
    rs.report(result)  # the one JSON line on stdout the pool reads
    return 0


if __name__ == "__main__":
    sys.exit(main())
