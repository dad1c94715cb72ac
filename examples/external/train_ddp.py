#!/usr/bin/python3
"""A data-parallel external trial for dltune: PyTorch's DistributedDataParallel over Gloo, one process per rank.

A study with `training.processes: N` starts N copies of this program (docs/data-parallel.md) with the rendezvous
variables torch.distributed reads (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so init_process_group("gloo") with
its default env:// method finds the other ranks. Beside them each copy gets the trial's usual files and variables
(docs/trial-protocol.md): the params in DLTUNE_PARAMS, the step budget in DLTUNE_MAX_TRAIN_STEPS, the seed, the
trial directory, and the report channel DLTUNE_REPORT, of which dltune reads rank 0's alone.

Params: learning_rate (required), batch_size (the global batch, default 128: each rank trains batch_size / N of it),
hidden (default 128). The model is a 784-hidden-10 MLP on Fashion-MNIST with Nesterov momentum 0.9.

What the ranks do, as the multi-host rules ask:
- every rank builds the model from the trial's seed (DDP also broadcasts rank 0's parameters at the start);
- batch k is one permutation of the training set drawn from (seed, epoch) on every rank, and rank r trains its rows
  [r * B / N, (r + 1) * B / N); DDP averages the gradients over the ranks during backward;
- each step all-reduces the ranks' loss (the global batch's mean, which rank 0 reports) and their stop flags, so a
  SIGTERM reaching any rank stops them all after the same step;
- every eval_every_steps steps rank 0 evaluates and writes a checkpoint (atomically) and reports both; the others
  wait for it at a barrier;
- resuming (DLTUNE_RESUMING=1), rank 0 loads its newest checkpoint and broadcasts it, so the other ranks need no
  access to the trial directory.

Exit status: 0 completed, 75 stopped with a checkpoint, 2 a mistake in the params.
"""
import signal
import sys

_stop_requested = False


def _request_stop(signum, _frame):
    global _stop_requested
    _stop_requested = True


signal.signal(signal.SIGTERM, _request_stop)
signal.signal(signal.SIGINT, _request_stop)

import gzip  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

EXIT_STOPPED = 75
DATA_DIR = "/usr/share/datasets/fashion-mnist"
CHECKPOINT = re.compile(r"^step_(\d{8})\.pt$")


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
    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(int(os.environ.get("DLTUNE_THREADS", "1")))
    params = json.load(open(os.environ["DLTUNE_PARAMS"]))
    unknown = set(params) - {"learning_rate", "batch_size", "hidden"}
    if unknown:
        print(f"train_ddp.py: unknown params {sorted(unknown)}", file=sys.stderr)
        return 2
    batch = int(params.get("batch_size", 128))
    if batch % world:
        print(f"train_ddp.py: batch_size {batch} is not a multiple of {world} ranks", file=sys.stderr)
        return 2
    share = batch // world
    steps = int(os.environ["DLTUNE_MAX_TRAIN_STEPS"])
    seed = int(os.environ.get("DLTUNE_SEED", "0")) % (1 << 63)
    trial_dir = os.environ["DLTUNE_TRIAL_DIR"]
    training = json.load(open(os.environ["DLTUNE_TRIAL"])).get("training", {})
    eval_every = int(training.get("eval_every_steps") or max(1, steps // 10))
    report = open(os.environ["DLTUNE_REPORT"], "a") if rank == 0 else None

    def send(**line):
        if report:
            report.write(json.dumps(line) + "\n")
            report.flush()

    train_x, train_y = load_images("train", 50_000)
    valid_x, valid_y = load_images("train", 10_000, skip=50_000)
    torch.manual_seed(seed)
    hidden = int(params.get("hidden", 128))
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=float(params["learning_rate"]), momentum=0.9, nesterov=True)
    step = 0
    checkpoints = os.path.join(trial_dir, "checkpoints")
    if os.environ.get("DLTUNE_RESUMING") == "1":
        state = [None]
        if rank == 0 and os.path.isdir(checkpoints):
            names = sorted(n for n in os.listdir(checkpoints) if CHECKPOINT.match(n))
            limit = int(os.environ.get("DLTUNE_RESUME_MAX_STEP", "-1"))
            names = [n for n in names if limit < 0 or int(CHECKPOINT.match(n).group(1)) <= limit]
            if names:
                state[0] = torch.load(os.path.join(checkpoints, names[-1]))
        dist.broadcast_object_list(state, src=0)
        if state[0] is not None:
            model.load_state_dict(state[0]["model"])
            optimizer.load_state_dict(state[0]["optimizer"])
            step = state[0]["step"]
    ddp = DistributedDataParallel(model)
    send(type="start", step=step)
    epoch_order, epoch = None, -1
    per_epoch = train_x.shape[0] // batch
    while step < steps:
        started = time.perf_counter()
        if step // per_epoch != epoch:
            epoch = step // per_epoch
            epoch_order = torch.randperm(train_x.shape[0], generator=torch.Generator().manual_seed(seed + epoch))
        first = (step % per_epoch) * batch + rank * share
        rows = epoch_order[first:first + share]
        loss = F.cross_entropy(ddp(train_x[rows]), train_y[rows])
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients over the ranks here
        optimizer.step()
        step += 1
        agreed = torch.tensor([loss.item(), 1.0 if _stop_requested else 0.0], dtype=torch.float64)
        dist.all_reduce(agreed)
        send(type="train", step=step, loss=agreed[0].item() / world, learning_rate=float(params["learning_rate"]),
             step_time=time.perf_counter() - started)
        stop = agreed[1].item() > 0
        if step % eval_every == 0 or step == steps or stop:
            if rank == 0:
                objective = None
                if step % eval_every == 0 or step == steps:
                    metrics = evaluate(model, valid_x, valid_y, 2 * batch)
                    send(type="eval", step=step, split="valid", metrics=metrics, examples=int(valid_x.shape[0]))
                    objective = metrics["error_rate"]
                os.makedirs(checkpoints, exist_ok=True)
                path = os.path.join(checkpoints, f"step_{step:08d}.pt")
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                           path + ".tmp")
                os.replace(path + ".tmp", path)
                line = {"type": "checkpoint", "step": step, "path": os.path.relpath(path, trial_dir)}
                if objective is not None:
                    line["objective"] = objective
                send(**line)
            dist.barrier()
        if stop and step < steps:
            dist.destroy_process_group()
            return EXIT_STOPPED
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
