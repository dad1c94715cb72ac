#!/usr/bin/python3
"""PyTorch peer of `dltune train fashion_mnist_mlp`, for bench/train_bench.cc.

The same model (784-H-10 MLP, inputs standardized inside the model with mean 0.2860 and std 0.3530, ReLU), data split
(train = the first 50,000 images of train-images-idx3-ubyte.gz, valid = the last 10,000), batch size, steps, optimizer
(--optimizer nesterov: torch.optim.SGD with Nesterov momentum, equal to the playbook's Nesterov for a constant learning
rate; --optimizer adam: torch.optim.Adam with --beta1, --beta2 and --epsilon, as a PyTorch user runs it; it adds
epsilon after bias-correcting v where dltune's rule adds it before, a negligible difference at epsilon 1e-8),
evaluation schedule (every --eval-every steps and at the last step: a fixed 10,000-example subset of train and the
full valid split, --eval-batch-size examples per batch, under no_grad) and thread count as dltune's built-in workload.
Batches are drawn without replacement from a fresh permutation each epoch (the last partial batch dropped), by tensor
indexing in the training loop (no DataLoader workers: the fastest plain-PyTorch input path for an in-memory data set).

Prints one line per evaluation, then a summary line the bench parses:
  pytorch_mlp optimizer=NAME steps=N train_seconds=... total_seconds=... steps_per_second=... valid_error_rate=... ...
train_seconds is the training loop alone (batching, forward, backward, update) without evaluations; total_seconds is
everything from reading the data to the end of the last evaluation (the interpreter and `import torch` excluded,
import_seconds reported beside it).
"""
import argparse
import gzip
import os
import sys
import time

_IMPORT_START = time.perf_counter()
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

_IMPORT_SECONDS = time.perf_counter() - _IMPORT_START

MEAN = 0.2860
STD = 0.3530
TRAIN_SIZE = 50_000
VALID_SIZE = 10_000


def read_idx(path, header_bytes):
    """The payload of a gzip'd IDX file as uint8."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    return np.frombuffer(data, dtype=np.uint8, offset=header_bytes)


def load_splits(data_dir):
    """(train_x, train_y, valid_x, valid_y): float32 [N, 784] in [0, 1] and int64 [N]."""
    images = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), 16).reshape(-1, 784)
    labels = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), 8)
    if images.shape[0] != TRAIN_SIZE + VALID_SIZE or labels.shape[0] != images.shape[0]:
        raise SystemExit(f"pytorch_mlp: {data_dir} does not hold the 60,000 Fashion-MNIST training images")
    x = torch.from_numpy(images.astype(np.float32) / 255.0)
    y = torch.from_numpy(labels.astype(np.int64))
    return x[:TRAIN_SIZE], y[:TRAIN_SIZE], x[TRAIN_SIZE:], y[TRAIN_SIZE:]


class Standardize(nn.Module):
    """(x - 0.2860) / 0.3530, as dltune's workload does inside the model."""

    def forward(self, x):
        return (x - MEAN) / STD


def evaluate(model, x, y, batch_size):
    """(mean loss, error rate) over x, y in batches, under no_grad."""
    model.eval()
    loss_sum = 0.0
    correct = 0
    with torch.no_grad():
        for begin in range(0, x.shape[0], batch_size):
            outputs = model(x[begin:begin + batch_size])
            labels = y[begin:begin + batch_size]
            loss_sum += F.cross_entropy(outputs, labels, reduction="sum").item()
            correct += (outputs.argmax(1) == labels).sum().item()
    model.train()
    return loss_sum / x.shape[0], 1.0 - correct / x.shape[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--eval-batch-size", type=int, default=256)
    parser.add_argument("--train-eval-examples", type=int, default=10_000)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--optimizer", choices=("nesterov", "adam"), default="nesterov")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--beta2", type=float, default=0.999)
    parser.add_argument("--epsilon", type=float, default=1e-8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)
    start = time.perf_counter()

    train_x, train_y, valid_x, valid_y = load_splits(args.data_dir)
    subset_generator = torch.Generator().manual_seed(args.seed + 1)
    subset = torch.randperm(TRAIN_SIZE, generator=subset_generator)[:args.train_eval_examples].sort().values
    train_eval_x, train_eval_y = train_x[subset], train_y[subset]

    model = nn.Sequential(Standardize(), nn.Linear(784, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    if args.optimizer == "nesterov":
        optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=args.momentum, nesterov=True)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate, betas=(args.beta1, args.beta2),
                                     eps=args.epsilon)
    order_generator = torch.Generator().manual_seed(args.seed + 2)
    batches_per_epoch = TRAIN_SIZE // args.batch_size

    train_seconds = 0.0
    eval_seconds = 0.0
    valid_error = train_error = float("nan")
    order = None
    model.train()
    loop_start = time.perf_counter()
    for step in range(args.steps):
        position = step % batches_per_epoch
        if position == 0:
            order = torch.randperm(TRAIN_SIZE, generator=order_generator)
        rows = order[position * args.batch_size:(position + 1) * args.batch_size]
        inputs, labels = train_x[rows], train_y[rows]
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        done = step + 1
        if done % args.eval_every == 0 or done == args.steps:
            eval_start = time.perf_counter()
            train_seconds += eval_start - loop_start
            train_loss, train_error = evaluate(model, train_eval_x, train_eval_y, args.eval_batch_size)
            valid_loss, valid_error = evaluate(model, valid_x, valid_y, args.eval_batch_size)
            loop_start = time.perf_counter()
            eval_seconds += loop_start - eval_start
            print(f"eval step={done} train_loss={train_loss:.4f} train_error_rate={train_error:.4f} "
                  f"valid_loss={valid_loss:.4f} valid_error_rate={valid_error:.4f}", flush=True)
    total_seconds = time.perf_counter() - start

    print(f"pytorch_mlp optimizer={args.optimizer} steps={args.steps} train_seconds={train_seconds:.3f} "
          f"eval_seconds={eval_seconds:.3f} total_seconds={total_seconds:.3f} import_seconds={_IMPORT_SECONDS:.3f} "
          f"steps_per_second={args.steps / train_seconds:.1f} train_error_rate={train_error:.4f} "
          f"valid_error_rate={valid_error:.4f} threads={torch.get_num_threads()} torch={torch.__version__}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
