#!/usr/bin/python3
"""PyTorch peer of `dltune train --processes P`, for `dltune_bench_train --processes LIST` (bench/train_bench.cc).

Trains dltune's Fashion-MNIST MLP (784-256-10, ReLU) or CNN (conv 1->32 and 32->64, 3x3 with padding 1, each with
BatchNorm2d, ReLU and 2x2 max-pooling, then dense 3136->128 with BatchNorm1d and ReLU, and 10 outputs) with inputs
standardized inside the model (mean 0.2860, std 0.3530), Nesterov momentum (lr 0.05, momentum 0.9), the global batch
--batch-size, one thread per process, as PyTorch users run data-parallel training: with --processes 1 a plain
training loop, with more torch.distributed's DistributedDataParallel over the gloo backend on 127.0.0.1, one process
per rank (torch.multiprocessing.spawn), each rank training its share of every batch (batch k is one permutation of
the 50,000 training images shared by the ranks, rank r taking its rows [r*B/P, (r+1)*B/P)).

Times each block of --log-every steps on rank 0 (after a barrier, so every rank is in the loop) and prints:
  pytorch_ddp model=NAME processes=P steps=N steps_per_second=X median_block_seconds=Y
steps_per_second is --log-every over the median block time, as the bench reads dltune's metrics.jsonl.
"""
import argparse
import gzip
import os
import socket
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn

MEAN = 0.2860
STD = 0.3530


def load_train(data_dir):
    with gzip.open(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), "rb") as f:
        images = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 784)[:50_000]
    with gzip.open(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), "rb") as f:
        labels = np.frombuffer(f.read(), dtype=np.uint8, offset=8)[:50_000]
    return torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(784, 256)
        self.output = nn.Linear(256, 10)

    def forward(self, x):
        return self.output(F.relu(self.hidden((x - MEAN) / STD)))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.norm1 = nn.BatchNorm2d(32)
        self.norm2 = nn.BatchNorm2d(64)
        self.norm3 = nn.BatchNorm1d(128)
        self.dense = nn.Linear(64 * 7 * 7, 128)
        self.output = nn.Linear(128, 10)

    def forward(self, x):
        x = (x.view(-1, 1, 28, 28) - MEAN) / STD
        x = F.max_pool2d(F.relu(self.norm1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.norm2(self.conv2(x))), 2)
        x = F.relu(self.norm3(self.dense(x.flatten(1))))
        return self.output(x)


def train(rank, args, port, results):
    torch.set_num_threads(1)
    if args.processes > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=args.processes)
    x, y = load_train(args.data_dir)
    torch.manual_seed(0)
    model = Mlp() if args.model == "mlp" else Cnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    trained = model
    if args.processes > 1:
        trained = nn.parallel.DistributedDataParallel(model)
        dist.barrier()
    share = args.batch_size // args.processes
    per_epoch = x.shape[0] // args.batch_size
    order, epoch = None, -1
    blocks = []
    started = time.perf_counter()
    for step in range(args.steps):
        if step // per_epoch != epoch:
            epoch = step // per_epoch
            order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(epoch))
        first = (step % per_epoch) * args.batch_size + rank * share
        rows = order[first:first + share]
        loss = F.cross_entropy(trained(x[rows]), y[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (step + 1) % args.log_every == 0:
            loss.item()  # as dltune pulls its metrics to the host at each log interval
            now = time.perf_counter()
            blocks.append(now - started)
            started = now
    if rank == 0:
        results.put(blocks)
    if args.processes > 1:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    if args.processes == 1:
        train(0, args, 0, results)
    else:
        mp.spawn(train, args=(args, free_port(), results), nprocs=args.processes)
    blocks = results.get()[1:]  # the first block holds the warm-up
    median = statistics.median(blocks)
    print(f"pytorch_ddp model={args.model} processes={args.processes} steps={args.steps} "
          f"steps_per_second={args.log_every / median:.2f} median_block_seconds={median:.5f}", flush=True)


if __name__ == "__main__":
    main()
