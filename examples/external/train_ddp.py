#!/usr/bin/python3
"""A data-parallel trial for dltune on its Python client: PyTorch's DistributedDataParallel over Gloo, one process
per rank.

A study with `training.processes: N` starts N copies of this program (docs/data-parallel.md) with the rendezvous
variables torch.distributed reads (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); it runs under `torchrun` as it is too.
The client (docs/python.md) makes the ranks behave as one trial: only rank 0 reports and writes checkpoints, every
rank restores the same checkpoint, and a SIGTERM reaching any rank stops them all after the same step.

Params: learning_rate (required), batch_size (the global batch, default 128: each rank trains batch_size / N of it),
hidden (default 128). The model is a 784-hidden-10 MLP on Fashion-MNIST with Nesterov momentum 0.9; batch k is one
permutation of the training set drawn from (seed, epoch) on every rank, of which rank r trains rows
[r * B / N, (r + 1) * B / N); DDP averages the gradients, and the loss reported is the global batch's mean.
"""
import gzip
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import dltune
import dltune.torch

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def load_images(prefix, size, skip=0):
    with gzip.open(os.path.join(DATA_DIR, f"{prefix}-images-idx3-ubyte.gz"), "rb") as f:
        images = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(DATA_DIR, f"{prefix}-labels-idx1-ubyte.gz"), "rb") as f:
        labels = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    x = torch.from_numpy(images[skip:skip + size].astype(np.float32) / 255.0)
    return x, torch.from_numpy(labels[skip:skip + size].astype(np.int64))


def evaluate(model, x, y, batch):
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            logits = model(x[i:i + batch])
            loss += F.cross_entropy(logits, y[i:i + batch], reduction="sum").item()
            correct += (logits.argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return {"loss": loss / x.shape[0], "error_rate": 1 - correct / x.shape[0], "accuracy": correct / x.shape[0]}


def main():
    trial = dltune.trial(max_train_steps=100)
    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    world = dist.get_world_size()
    torch.set_num_threads(int(os.environ.get("DLTUNE_THREADS", "1")))
    if unknown := set(trial.params) - {"learning_rate", "batch_size", "hidden"}:
        raise SystemExit(f"train_ddp.py: unknown params {sorted(unknown)}")
    batch = int(trial.params.get("batch_size", 128))
    if batch % world:
        raise SystemExit(f"train_ddp.py: batch_size {batch} is not a multiple of {world} ranks")
    share = batch // world

    train_x, train_y = load_images("train", 50_000)
    valid_x, valid_y = load_images("train", 10_000, skip=50_000)
    torch.manual_seed(trial.seed)
    hidden = int(trial.params.get("hidden", 128))
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=trial.params["learning_rate"], momentum=0.9, nesterov=True)
    start = dltune.torch.restore(trial, model, optimizer)  # every rank loads the same checkpoint
    ddp = DistributedDataParallel(model)
    per_epoch = train_x.shape[0] // batch
    for step in range(start + 1, trial.max_train_steps + 1):
        epoch, index = divmod(step - 1, per_epoch)
        order = torch.randperm(train_x.shape[0], generator=torch.Generator().manual_seed((trial.seed + epoch) % 2**63))
        rows = order[index * batch + dist.get_rank() * share:][:share]
        loss = F.cross_entropy(ddp(train_x[rows]), train_y[rows])
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients over the ranks here
        optimizer.step()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss)
        trial.report(step, loss=global_loss / world, learning_rate=trial.params["learning_rate"])
        if trial.evaluates_at(step):
            if trial.is_main:
                metrics = evaluate(model, valid_x, valid_y, 2 * batch)
                trial.record_evaluation(step, "valid", examples=len(valid_x), **metrics)
            dltune.torch.save(trial, step, model, optimizer)
            dist.barrier()  # the others wait for rank 0's evaluation and checkpoint
        if trial.should_stop():
            trial.stop(step)
    # DDP's reducer holds the process group: released first, once every rank is done, or the group's teardown at
    # exit can wait for ever on a rank that has already gone (seen with torch 1.13's Gloo).
    dist.barrier()
    del ddp
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
