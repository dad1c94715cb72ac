#!/usr/bin/python3
"""Optuna 3.1 peer of `dltune run examples/quickstart.yaml`: Nesterov momentum vs Adam on the Fashion-MNIST MLP.

The same study written the way an Optuna user would write it:

- one Optuna study per optimizer (the scientific hyperparameter), each with --trials-per-optimizer trials (16) and
  optuna.samplers.QMCSampler(qmc_type="halton", seed=0), minimizing the trial's best valid error rate;
- the quickstart's search space: Nesterov learning_rate in [1e-3, 1] and one_minus_momentum in [0.01, 0.5], Adam
  learning_rate in [1e-5, 1e-2] and one_minus_beta1 in [0.01, 0.5], all log scale; epsilon 1e-8, weight decay 0,
  batch size 128; torch.optim's update rules, as a PyTorch user would write them:
  torch.optim.SGD(lr, momentum=1 - one_minus_momentum, nesterov=True) and
  torch.optim.Adam(lr, betas=(1 - one_minus_beta1, 0.999), eps=1e-8);
- dltune's model, data and evaluation schedule (docs/training.md): a 784-256-10 ReLU MLP with inputs standardized
  inside the model (mean 0.2860, std 0.3530); train = the first 50,000 training images, valid = the last 10,000;
  --steps steps (2000) of batch 128, drawn without replacement from a fresh permutation each epoch; an evaluation
  every steps / 10 steps and at the last step of a fixed 10,000-example train subset and the whole valid split,
  in batches of 256 (twice the training batch) under no_grad; the objective is the best valid error rate over the
  evaluations (the playbook's retrospective checkpoint selection), reported to Optuna with trial.report at each
  evaluation; like dltune, a trial whose training loss is NaN, infinite or above 100 times its first loss (checked at
  each evaluation) stops as infeasible, returned to Optuna as NaN (a failed trial);
- torch.set_num_threads(1) per trial, the trial's number as its seed.

The environment is used as it is, as a user would run it: on a CPU newer than Debian's OpenBLAS 0.3.21 (an AVX-512
Xeon, say) torch's Linear layers then run OpenBLAS's generic "Prescott" kernels, about 3x slower than the "SkylakeX"
ones dltune switches to (docs/training.md, "BLAS kernels"). OPENBLAS_CORETYPE=SkylakeX in the environment gives the
peer the same kernels; the kernel set used is printed and written to the JSON as openblas_core.

Parallelism (--jobs J, default the number of cores): study.optimize(n_jobs=J), J trials at once in threads of one
process sharing Optuna's in-memory storage, each study in turn. That is the default because it was the faster of the
two correct ways on this machine: PyTorch releases the GIL in its kernels, so the threads of this model train as
fast as separate processes (two threads of the training loop and two processes: the same steps/s within noise), and
they skip the start-up of worker processes (interpreter, torch and optuna imports, data loading: 2 x 2 trials of
2000 steps with 2 jobs took 41 s with processes and 29 s with threads, on a 2-core machine that was not idle).
--parallel-mode processes is the other way Optuna documents: J worker processes share one SQLite storage, each
running study.optimize on its share of each study's trials. There each worker gives the sampler's fallback
RandomSampler its own seed (the worker's index): QMCSampler samples every trial that starts before the first one has
completed with that sampler, and with seed 0 in every process the first trials of the J processes would get the same
params. In both modes a trial's model is seeded and built under a lock, since torch's global generator is shared.

Options: --trials-per-optimizer N (16), --steps N (2000), --jobs J, --parallel-mode threads|processes, --out FILE
(JSON: {"wall_seconds", "trials", "best_valid_error": {"nesterov", "adam"}, "best_overall", "train_steps" and
"evaluations" summed over the trials, "eval_examples", ...}), --storage URL (an RDB URL to keep the studies; default
in memory, or a temporary SQLite file for processes). wall_seconds runs from creating the studies to the end of the
last trial: data loading included (and with processes the workers' start-up and imports), the interpreter's start and
the first imports not. Prints a table of the trials and a summary line.

Run with the Debian interpreter that has optuna and torch:
    /usr/bin/python3 bench/peers/optuna_quickstart.py --out /tmp/optuna_quickstart.json
"""
import argparse
import ctypes
import gzip
import json
import math
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings

import numpy as np
import optuna
import torch
import torch.nn.functional as F
from torch import nn

OPTIMIZERS = ("nesterov", "adam")
DATA_DIR = "/usr/share/datasets/fashion-mnist"
MEAN = 0.2860
STD = 0.3530
TRAIN_SIZE = 50_000
VALID_SIZE = 10_000
TRAIN_EVAL_EXAMPLES = 10_000
BATCH_SIZE = 128
EVAL_BATCH_SIZE = 2 * BATCH_SIZE
HIDDEN = 256
EPSILON = 1e-8
DIVERGENCE_FACTOR = 100.0

_data = None  # (train_x, train_y, valid_x, valid_y), loaded once per process, on DEVICE
# Where the trials train (--device): the data set is moved there once, each trial's model and batches too.
DEVICE = torch.device(os.environ.get("OPTUNA_QUICKSTART_DEVICE", "cpu"))
# Seeding and building a model under one lock: torch's global generator is shared by the threads of --parallel-mode
# threads, and a trial's initialization must depend on its seed alone.
_init_lock = threading.Lock()


def read_idx(path, header_bytes):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=header_bytes)


def data():
    global _data
    if _data is None:
        images = read_idx(os.path.join(DATA_DIR, "train-images-idx3-ubyte.gz"), 16).reshape(-1, 784)
        labels = read_idx(os.path.join(DATA_DIR, "train-labels-idx1-ubyte.gz"), 8)
        x = torch.from_numpy(images.astype(np.float32) / 255.0)
        y = torch.from_numpy(labels.astype(np.int64))
        _data = tuple(t.to(DEVICE) for t in (x[:TRAIN_SIZE], y[:TRAIN_SIZE], x[TRAIN_SIZE:], y[TRAIN_SIZE:]))
    return _data


class Standardize(nn.Module):
    def forward(self, x):
        return (x - MEAN) / STD


def evaluate(model, x, y):
    """(mean loss, error rate) over (x, y)."""
    model.eval()
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for begin in range(0, x.shape[0], EVAL_BATCH_SIZE):
            outputs = model(x[begin:begin + EVAL_BATCH_SIZE])
            labels = y[begin:begin + EVAL_BATCH_SIZE]
            loss_sum += F.cross_entropy(outputs, labels, reduction="sum").item()
            correct += (outputs.argmax(1) == labels).sum().item()
    model.train()
    return loss_sum / x.shape[0], 1.0 - correct / x.shape[0]


def objective(trial, optimizer_name, steps):
    if optimizer_name == "nesterov":
        learning_rate = trial.suggest_float("learning_rate", 1e-3, 1.0, log=True)
        one_minus_momentum = trial.suggest_float("one_minus_momentum", 0.01, 0.5, log=True)
    else:
        learning_rate = trial.suggest_float("learning_rate", 1e-5, 1e-2, log=True)
        one_minus_beta1 = trial.suggest_float("one_minus_beta1", 0.01, 0.5, log=True)

    train_x, train_y, valid_x, valid_y = data()
    seed = trial.number
    with _init_lock:
        torch.manual_seed(seed)
        model = nn.Sequential(Standardize(), nn.Linear(784, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 10)).to(DEVICE)
    if optimizer_name == "nesterov":
        optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=1.0 - one_minus_momentum,
                                    nesterov=True, weight_decay=0.0)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate, betas=(1.0 - one_minus_beta1, 0.999),
                                     eps=EPSILON, weight_decay=0.0)
    subset = torch.randperm(TRAIN_SIZE, generator=torch.Generator().manual_seed(seed + 1))[:TRAIN_EVAL_EXAMPLES]
    subset = subset.to(DEVICE)
    train_eval_x, train_eval_y = train_x[subset], train_y[subset]
    order_generator = torch.Generator().manual_seed(seed + 2)
    batches_per_epoch = TRAIN_SIZE // BATCH_SIZE
    eval_every = max(1, steps // 10)

    best_error, best_step, first_loss, evaluations = math.inf, 0, None, 0
    interval_loss = torch.zeros((), device=DEVICE)  # summed on the tensor side: no host synchronization per step
    model.train()
    for step in range(steps):
        position = step % batches_per_epoch
        if position == 0:
            order = torch.randperm(TRAIN_SIZE, generator=order_generator).to(DEVICE)
        rows = order[position * BATCH_SIZE:(position + 1) * BATCH_SIZE]
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(train_x[rows]), train_y[rows])
        loss.backward()
        optimizer.step()
        interval_loss += loss.detach()
        if first_loss is None:
            first_loss = loss.item()
        done = step + 1
        if done % eval_every == 0 or done == steps:
            mean_loss = interval_loss.item() / (done - (done - 1) // eval_every * eval_every)
            interval_loss.zero_()
            if not math.isfinite(mean_loss) or mean_loss > DIVERGENCE_FACTOR * first_loss:
                trial.set_user_attr("infeasible", f"training loss {mean_loss:.4g} at step {done}")
                trial.set_user_attr("work", [done, evaluations])
                return float("nan")  # Optuna records the trial as failed, as dltune records it infeasible
            _, train_error = evaluate(model, train_eval_x, train_eval_y)
            _, valid_error = evaluate(model, valid_x, valid_y)
            evaluations += 1
            trial.report(valid_error, done)
            if valid_error < best_error:
                best_error, best_step = valid_error, done
            trial.set_user_attr("train_error", train_error)
    trial.set_user_attr("best_step", best_step)
    trial.set_user_attr("work", [steps, evaluations])  # steps trained, evaluations: for the bench's machine limit
    return best_error


def openblas_core():
    """The OpenBLAS kernel set torch's BLAS runs ("Prescott", "SkylakeX", ...), or "" when it is not OpenBLAS."""
    torch.ones(2, 2) @ torch.ones(2, 2)  # makes sure the BLAS is loaded
    with open("/proc/self/maps", encoding="utf-8") as maps:
        paths = sorted({line.split()[-1] for line in maps if "blas" in line.lower() and "/" in line})
    for path in paths:
        try:
            corename = ctypes.CDLL(path).openblas_get_corename
        except (OSError, AttributeError):
            continue
        corename.restype = ctypes.c_char_p
        return corename().decode()
    return ""


def study_name(optimizer_name):
    return f"quickstart-{optimizer_name}"


def make_sampler(worker_index=None):
    if worker_index is None:
        return optuna.samplers.QMCSampler(qmc_type="halton", seed=0)
    # A per-process seed for the trials sampled before the first one completes (see the docstring).
    return optuna.samplers.QMCSampler(qmc_type="halton", seed=0,
                                      independent_sampler=optuna.samplers.RandomSampler(seed=worker_index))


def quiet():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def worker_main(index, storage, shares, steps):
    """One worker process: its share of each study's trials."""
    quiet()
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    data()
    for optimizer_name in OPTIMIZERS:
        study = optuna.load_study(study_name=study_name(optimizer_name), storage=storage,
                                  sampler=make_sampler(index))
        study.optimize(lambda trial: objective(trial, optimizer_name, steps), n_trials=shares[index])


def run_processes(args, storage):
    shares = [args.trials_per_optimizer // args.jobs + (j < args.trials_per_optimizer % args.jobs)
              for j in range(args.jobs)]
    context = multiprocessing.get_context("spawn")  # no fork of a process that has started torch's threads
    workers = [context.Process(target=worker_main, args=(j, storage, shares, args.steps))
               for j in range(args.jobs) if shares[j] > 0]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    if failed:
        raise SystemExit(f"optuna_quickstart: worker processes exited with {failed}")


def run_threads(args, storage):
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    data()
    for optimizer_name in OPTIMIZERS:
        study = optuna.load_study(study_name=study_name(optimizer_name), storage=storage, sampler=make_sampler())
        study.optimize(lambda trial: objective(trial, optimizer_name, args.steps),
                       n_trials=args.trials_per_optimizer, n_jobs=args.jobs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials-per-optimizer", type=int, default=16)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="trials at once (default: cores)")
    parser.add_argument("--parallel-mode", choices=("threads", "processes"), default="threads")
    parser.add_argument("--storage", help="RDB storage URL (default: in memory for threads, a temporary SQLite "
                                          "file for processes)")
    parser.add_argument("--out", help="write the results as JSON to this file")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the trials train (default cpu; cuda: the data set and models on the GPU)")
    args = parser.parse_args()
    if args.trials_per_optimizer < 1 or args.steps < 1 or args.jobs < 1:
        parser.error("--trials-per-optimizer, --steps and --jobs must be >= 1")
    quiet()
    global DEVICE
    DEVICE = torch.device(args.device)
    os.environ["OPTUNA_QUICKSTART_DEVICE"] = args.device  # for --parallel-mode processes' workers

    temporary = None
    storage = args.storage
    if storage is None and args.parallel_mode == "threads":
        storage = optuna.storages.InMemoryStorage()  # Optuna's default storage, shared by the threads
    elif storage is None:
        temporary = tempfile.mkdtemp(prefix="optuna_quickstart.")
        storage = f"sqlite:///{os.path.join(temporary, 'optuna.db')}"
    try:
        start = time.perf_counter()
        for optimizer_name in OPTIMIZERS:
            optuna.create_study(study_name=study_name(optimizer_name), storage=storage, direction="minimize",
                                sampler=make_sampler())
        (run_processes if args.parallel_mode == "processes" else run_threads)(args, storage)
        wall_seconds = time.perf_counter() - start
        studies = {name: optuna.load_study(study_name=study_name(name), storage=storage) for name in OPTIMIZERS}
        result = summarize(args, studies, wall_seconds)
    finally:
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0


def summarize(args, studies, wall_seconds):
    """Prints the trials and the summary; returns the JSON result."""
    complete = optuna.trial.TrialState.COMPLETE
    best, trial_count, failed, train_steps, evaluations = {}, 0, 0, 0, 0
    for name, study in studies.items():
        trials = study.get_trials(deepcopy=False)
        trial_count += len(trials)
        for t in trials:
            done_steps, done_evaluations = t.user_attrs.get("work", (0, 0))
            train_steps += done_steps
            evaluations += done_evaluations
        print(f"study {study.study_name} ({len(trials)} trials)")
        print(f"  {'trial':>5}  {'learning_rate':>13}  {'one_minus_*':>11}  {'best valid error':>16}  {'at step':>7}")
        for t in trials:
            second = t.params.get("one_minus_momentum", t.params.get("one_minus_beta1", math.nan))
            value = f"{t.value:.4f}" if t.state == complete else t.user_attrs.get("infeasible", t.state.name)
            print(f"  {t.number:>5}  {t.params.get('learning_rate', math.nan):>13.4g}  {second:>11.4g}  "
                  f"{value:>16}  {t.user_attrs.get('best_step', '-'):>7}")
        distinct = len({tuple(sorted(t.params.items())) for t in trials})
        if distinct < len(trials):
            print(f"  note: {len(trials) - distinct} trial(s) repeat another's params")
        done = [t for t in trials if t.state == complete]
        failed += len(trials) - len(done)
        best[name] = min(t.value for t in done) if done else None
    values = [v for v in best.values() if v is not None]
    best_overall = min(values) if values else None
    winner = min((v, k) for k, v in best.items() if v is not None)[1] if values else None
    print(f"optuna_quickstart trials={trial_count} steps={args.steps} jobs={args.jobs} mode={args.parallel_mode} "
          f"wall_seconds={wall_seconds:.2f} "
          + " ".join(f"best_valid_error_{k}={v:.4f}" if v is not None else f"best_valid_error_{k}=none"
                     for k, v in best.items())
          + f" best_overall={best_overall} ({winner}) optuna={optuna.__version__} torch={torch.__version__}"
          + f" openblas_core={openblas_core() or '-'}",
          flush=True)
    return {
        "wall_seconds": wall_seconds,
        "trials": trial_count,
        "best_valid_error": best,
        "best_overall": best_overall,
        "best_optimizer": winner,
        "failed_trials": failed,
        "train_steps": train_steps,
        "evaluations": evaluations,
        "eval_examples": evaluations * (TRAIN_EVAL_EXAMPLES + VALID_SIZE),
        "steps": args.steps,
        "trials_per_optimizer": args.trials_per_optimizer,
        "jobs": args.jobs,
        "parallel_mode": args.parallel_mode,
        "optuna": optuna.__version__,
        "torch": torch.__version__,
        "openblas_core": openblas_core(),
    }


if __name__ == "__main__":
    sys.exit(main())
