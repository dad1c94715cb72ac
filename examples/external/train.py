#!/usr/bin/python3
"""A PyTorch MLP (784-hidden-10, ReLU) on Fashion-MNIST, tuned by dltune through its Python client (docs/python.md).

Params (any other is an error naming it, so a typo never trains the default):

  learning_rate                       required; constant for the whole run
  optimizer                           nesterov (default), momentum, sgd or adam
  one_minus_momentum | momentum       momentum and nesterov: gamma (default 0.9)
  one_minus_beta1 | beta1             adam: beta1 (default 0.9)
  one_minus_beta2 | beta2             adam: beta2 (default 0.999)
  epsilon                             adam: default 1e-8
  weight_decay                        L2 added to the gradient (torch.optim's weight_decay), default 0
  batch_size                          default 128
  grad_clip_norm                      clip by the global gradient norm; default 0 (off)
  hidden                              width of the hidden layer, default 256; --hidden N wins over it

The data and model are dltune's fashion_mnist_mlp workload: train = the first 50,000 training images, valid = the
last 10,000, test = t10k; pixels standardized inside the model (mean 0.2860, std 0.3530); PyTorch's default
initialization from the trial's seed; batch k of epoch e drawn from a permutation of (seed, e), so a resumed run is
bit-identical to an uninterrupted one. At each evaluation of the study's schedule: a fixed 10,000-example subset of
train and the valid split (or its fixed sample, training.valid_sample_examples, until the last step), test at the end
when training.test_at_end; then a checkpoint.

The client does the rest: params and settings, report lines, checkpoints and resuming, the stop on SIGTERM (exit
75), divergence (an infeasible trial), and warm trials: the imports and the decoded data set are the program's
set-up, done once, and each trial (`train`) starts in a process forked from there; with --reuse-process, each
worker slot's trials run one after the other in one process, which keeps the data set on the trial's device from
one to the next (docs/python.md, "Reusing the process"). Standalone, without dltune:

  /usr/bin/python3 examples/external/train.py --params '{"learning_rate": 0.05}'   # reports on stdout
"""
import argparse
import functools
import gzip
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import dltune
import dltune.torch

DATA_DIR = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
MEAN, STD = 0.2860, 0.3530
KNOWN = {"learning_rate", "optimizer", "momentum", "one_minus_momentum", "beta1", "one_minus_beta1", "beta2",
         "one_minus_beta2", "epsilon", "weight_decay", "batch_size", "grad_clip_norm", "hidden"}


def load_split(prefix, size):
    """(x float32 [size, 784] in [0, 1], y int64 [size]) from one gzip'd IDX image/label pair."""
    def payload(kind, header):
        with gzip.open(os.path.join(DATA_DIR, f"{prefix}-{kind}-idx{3 if kind == 'images' else 1}-ubyte.gz")) as f:
            return np.frombuffer(f.read(), dtype=np.uint8, offset=header)
    images, labels = payload("images", 16), payload("labels", 8)
    x = torch.from_numpy(images.reshape(size, 784).astype(np.float32) / 255.0)
    return x, torch.from_numpy(labels.astype(np.int64))


def fixed_sample(x, y, count, seed):
    """`count` examples of (x, y) chosen once from `seed`, in their original order."""
    if count <= 0 or count >= x.shape[0]:
        return x, y
    rows = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed))[:count].sort().values
    return x[rows.to(x.device)], y[rows.to(x.device)]


def gamma(params, name, default):
    """`name`, or 1 - `one_minus_<name>` (the playbook searches 1 - momentum on a log scale)."""
    if f"one_minus_{name}" in params:
        return 1.0 - params[f"one_minus_{name}"]
    return params.get(name, default)


def build_optimizer(params, parameters):
    kind, lr, decay = params.get("optimizer", "nesterov"), params["learning_rate"], params.get("weight_decay", 0.0)
    if kind == "adam":
        return torch.optim.Adam(parameters, lr=lr, betas=(gamma(params, "beta1", 0.9), gamma(params, "beta2", 0.999)),
                                eps=params.get("epsilon", 1e-8), weight_decay=decay)
    if kind not in ("nesterov", "momentum", "sgd"):
        raise SystemExit(f"train.py: param optimizer must be nesterov, momentum, sgd or adam, not {kind!r}")
    momentum = gamma(params, "momentum", 0.9) if kind != "sgd" else 0.0
    return torch.optim.SGD(parameters, lr=lr, momentum=momentum, nesterov=kind == "nesterov", weight_decay=decay)


def evaluate(model, x, y, batch_size):
    """{loss, error_rate, accuracy}: exact per-example averages over (x, y)."""
    model.eval()
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for begin in range(0, x.shape[0], batch_size):
            outputs, labels = model(x[begin:begin + batch_size]), y[begin:begin + batch_size]
            loss_sum += F.cross_entropy(outputs, labels, reduction="sum").item()
            correct += (outputs.argmax(1) == labels).sum().item()
    model.train()
    return {"loss": loss_sum / x.shape[0], "error_rate": 1 - correct / x.shape[0], "accuracy": correct / x.shape[0]}


class Standardize(nn.Module):
    def forward(self, x):
        return (x - MEAN) / STD


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--hidden", type=int, help="hidden layer width (default: param hidden, else 256)")
    parser.add_argument("--reuse-process", action="store_true",
                        help="under dltune, run every trial of a worker slot in one process, keeping the data on "
                             "the trial's device from one trial to the next (docs/python.md, \"Reusing the process\")")
    return parser.parse_args()


ON_DEVICE = {}  # the data set on each device a trial of this process used: kept only when the process is reused


def on_device(data, device):
    if str(device) not in ON_DEVICE:
        ON_DEVICE[str(device)] = {split: tuple(t.to(device) for t in pair) for split, pair in data.items()}
    return ON_DEVICE[str(device)]


def gradient_norm(parameters):
    """The global L2 norm of the gradients, as clip_grad_norm_ computes it, without its pass over every gradient."""
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in parameters
                                                 if p.grad is not None]))


def train(trial, data):
    """One trial: everything that depends on its params, seed and settings, from the decoded data set."""
    args = arguments()
    params = trial.params
    if unknown := set(params) - KNOWN:
        raise SystemExit(f"train.py: unknown params {sorted(unknown)}; it reads {sorted(KNOWN)}")
    torch.set_num_threads(int(os.environ.get("DLTUNE_THREADS", "1")))
    batch_size = int(params.get("batch_size", 128))
    torch.manual_seed(trial.seed)
    hidden = args.hidden or int(params.get("hidden", 256))
    device = dltune.torch.device(trial)  # the GPU dltune gave the trial, else the CPU
    model = nn.Sequential(Standardize(), nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10)).to(device)
    optimizer = build_optimizer(params, model.parameters())

    data = on_device(data, device)
    train_x, train_y = data["train"]
    valid = train_x[50_000:], train_y[50_000:]
    train_x, train_y = train_x[:50_000], train_y[:50_000]
    splits = {"train": fixed_sample(train_x, train_y, 10_000, trial.seed ^ 1), "valid": valid}
    if trial.training.get("valid_sample_examples", 0) > 0:
        splits["valid_sample"] = fixed_sample(*valid, trial.training["valid_sample_examples"], trial.seed ^ 2)
    if trial.training.get("test_at_end") or (trial.evaluating and trial.evaluating.split == "test"):
        splits["test"] = data["test"]

    if trial.evaluating:  # dltune evaluate / launch: one split of one checkpoint
        step = dltune.torch.load(trial.evaluating.checkpoint, model)
        x, y = splits[trial.evaluating.split]
        trial.record_evaluation(step, trial.evaluating.split, examples=len(x), **evaluate(model, x, y, 2 * batch_size))
        return

    per_epoch = train_x.shape[0] // batch_size  # an epoch's last partial batch is dropped
    order, order_epoch = None, -1
    clip = params.get("grad_clip_norm", 0.0)
    start = dltune.torch.restore(trial, model, optimizer)
    for step in range(start + 1, trial.max_train_steps + 1):
        epoch, index = divmod(step - 1, per_epoch)
        if epoch != order_epoch:
            generator = torch.Generator().manual_seed((trial.seed + 1_000_003 * (epoch + 1)) % 2**63)
            order, order_epoch = torch.randperm(train_x.shape[0], generator=generator).to(device), epoch
        rows = order[index * batch_size:(index + 1) * batch_size]
        loss = F.cross_entropy(model(train_x[rows]), train_y[rows])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = (torch.nn.utils.clip_grad_norm_(model.parameters(), clip) if clip > 0
                     else gradient_norm(model.parameters()))
        optimizer.step()
        trial.report(step, loss=loss.detach(), learning_rate=params["learning_rate"], grad_norm=grad_norm,
                     **({"clipped": bool(grad_norm > clip)} if clip > 0 else {}))
        if trial.evaluates_at(step):
            last = step == trial.max_train_steps
            for split, (x, y) in splits.items():
                if split == "test" and not last or split == "valid" and "valid_sample" in splits and not last:
                    continue
                trial.record_evaluation(step, split, examples=len(x), **evaluate(model, x, y, 2 * batch_size))
            dltune.torch.save(trial, step, model, optimizer)
        if trial.should_stop():
            trial.stop(step)


def main():
    # The set-up, which depends on no trial: under dltune it runs once in a program server, and every trial is a
    # process forked from there (dltune.run; docs/python.md, "Warm trials"). It decodes the data set on the CPU
    # and starts nothing on a GPU: each trial moves what it needs to its own device.
    data = {"train": load_split("train", 60_000), "test": load_split("t10k", 10_000)}
    dltune.run(functools.partial(train, data=data), max_train_steps=1000, reuse_process=arguments().reuse_process)


if __name__ == "__main__":
    main()
