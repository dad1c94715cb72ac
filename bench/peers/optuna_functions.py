#!/usr/bin/python3
"""Optuna 3.1 peer of bench/gp_bench.cc: TPESampler and RandomSampler on standard test functions.

The functions, domains and infeasible regions are those of bench/test_functions.cc (gp_bench --check-functions
compares the two definitions at fixed points):

- branin (2-D, x1 in [-5, 10], x2 in [0, 15]), hartmann6 (6-D, [0, 1]^6), rosenbrock4 (4-D, [-5, 10]^4),
  ackley5 (5-D, [-32.768, 32.768]^5), all minimized;
- NAME_infeasible: the same function, except that evaluating a point inside an axis-aligned box (FUNCTIONS[...].region)
  "diverges". The objective then returns float("nan"), which is how Optuna's FAQ says a trial that produced no value
  is reported ("Trials that return NaN are treated as failures, but they will not abort studies"); the trial ends in
  state FAIL, and TPESampler and RandomSampler leave FAIL trials out of everything they do (optuna#566, #2864, #3472).

Each run is one study (in memory) of --evals trials on one function with TPESampler(seed=s) or
RandomSampler(seed=s), Optuna's defaults otherwise, for s in 0 .. --seeds-1, driven by study.optimize and
trial.suggest_float("x1", lo, hi), ... as an Optuna user writes it. --jobs runs that many studies at once in
worker processes. Then the suggestion latency of TPESampler: a study holding --latency-history completed trials of
hartmann6 at uniformly random points, the time of one study.ask() that samples all 6 params (fixed_distributions),
median of --latency-repeats studies after one untimed warm-up, pinned to one core (no other work of this script
runs meanwhile; BLAS threads are limited to 1).

Output: JSON on stdout:
    {"optuna": "3.1.0", "evals": 100, "checkpoints": [20, 50, 100],
     "runs": [{"function", "sampler", "seed", "best": [best value after each checkpoint, null if no value yet],
               "infeasible": evaluations inside the infeasible region, "seconds": wall time of the study}, ...],
     "tpe_latency": {"history": 200, "dims": 6, "seconds": [...], "median": ...}}
Progress on stderr. With --check POINTS.json ({"function": [[x1, ...], ...]}) it only evaluates those points and
prints {"function": [{"value": v or null, "infeasible": bool}, ...]}.

    /usr/bin/python3 bench/peers/optuna_functions.py --seeds 20 --evals 100 --jobs 2 > optuna_functions.json
"""
import os

# One BLAS thread per process (numpy in TPE's Parzen estimators), as dltune's latency is measured on one core.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse
import dataclasses
import json
import logging
import math
import multiprocessing
import statistics
import sys
import time
from typing import Callable, List, Optional, Sequence, Tuple


def branin(x: Sequence[float]) -> float:
    a, b, c = 1.0, 5.1 / (4.0 * math.pi * math.pi), 5.0 / math.pi
    r, s, t = 6.0, 10.0, 1.0 / (8.0 * math.pi)
    term = x[1] - b * x[0] * x[0] + c * x[0] - r
    return a * term * term + s * (1.0 - t) * math.cos(x[0]) + s


HARTMANN6_ALPHA = (1.0, 1.2, 3.0, 3.2)
HARTMANN6_A = ((10.0, 3.0, 17.0, 3.5, 1.7, 8.0),
               (0.05, 10.0, 17.0, 0.1, 8.0, 14.0),
               (3.0, 3.5, 1.7, 10.0, 17.0, 8.0),
               (17.0, 8.0, 0.05, 10.0, 0.1, 14.0))
HARTMANN6_P = ((0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886),
               (0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991),
               (0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650),
               (0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381))


def hartmann6(x: Sequence[float]) -> float:
    total = 0.0
    for i in range(4):
        inner = 0.0
        for j in range(6):
            d = x[j] - HARTMANN6_P[i][j]
            inner += HARTMANN6_A[i][j] * d * d
        total += HARTMANN6_ALPHA[i] * math.exp(-inner)
    return -total


def rosenbrock(x: Sequence[float]) -> float:
    total = 0.0
    for i in range(len(x) - 1):
        a = x[i + 1] - x[i] * x[i]
        b = 1.0 - x[i]
        total += 100.0 * a * a + b * b
    return total


def ackley(x: Sequence[float]) -> float:
    squares, cosines = 0.0, 0.0
    for v in x:
        squares += v * v
        cosines += math.cos(2.0 * math.pi * v)
    n = float(len(x))
    return -20.0 * math.exp(-0.2 * math.sqrt(squares / n)) - math.exp(cosines / n) + 20.0 + math.e


@dataclasses.dataclass(frozen=True)
class TestFunction:
    name: str
    evaluate: Callable[[Sequence[float]], float]
    domain: Tuple[Tuple[float, float], ...]
    # The infeasible box: (dimension index, lo, hi) for each constrained dimension, closed intervals; () = none.
    region: Tuple[Tuple[int, float, float], ...] = ()

    def infeasible(self, x: Sequence[float]) -> bool:
        return bool(self.region) and all(lo <= x[d] <= hi for d, lo, hi in self.region)


def _functions():
    base = [
        TestFunction("branin", branin, ((-5.0, 10.0), (0.0, 15.0))),
        TestFunction("hartmann6", hartmann6, ((0.0, 1.0),) * 6),
        TestFunction("rosenbrock4", rosenbrock, ((-5.0, 10.0),) * 4),
        TestFunction("ackley5", ackley, ((-32.768, 32.768),) * 5),
    ]
    regions = {
        "branin": ((0, -2.0, 2.0),),
        "hartmann6": ((0, 0.25, 0.75), (5, 0.1, 0.6)),
        "rosenbrock4": ((0, 1.25, 8.75), (1, -5.0, 2.5)),
        "ackley5": ((0, 1.0, 32.768), (1, -32.768, 1.0)),
    }
    result = {f.name: f for f in base}
    for f in base:
        name = f.name + "_infeasible"
        result[name] = dataclasses.replace(f, name=name, region=regions[f.name])
    return result


FUNCTIONS = _functions()
SAMPLERS = ("tpe", "optuna_random")


class _DropFailedTrialMessages(logging.Filter):
    """Drops Optuna's two warning lines per failed trial: the infeasible variants fail a quarter of their trials."""

    def filter(self, record):
        message = record.getMessage()
        return not (message.startswith("Trial ") and " failed " in message)


def quiet():
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for handler in logging.getLogger("optuna").handlers:
        handler.addFilter(_DropFailedTrialMessages())


def make_sampler(name: str, seed: int):
    import optuna
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)


def run_study(task):
    """One study: (function name, sampler name, seed, evals, checkpoints) -> the run's result."""
    import optuna
    function_name, sampler_name, seed, evals, checkpoints = task
    quiet()
    function = FUNCTIONS[function_name]
    infeasible = 0

    def objective(trial):
        nonlocal infeasible
        x = [trial.suggest_float(f"x{d + 1}", lo, hi) for d, (lo, hi) in enumerate(function.domain)]
        if function.infeasible(x):
            infeasible += 1
            return float("nan")  # the trial fails: no value
        return function.evaluate(x)

    start = time.perf_counter()
    study = optuna.create_study(direction="minimize", sampler=make_sampler(sampler_name, seed))
    study.optimize(objective, n_trials=evals)
    seconds = time.perf_counter() - start
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    best: List[Optional[float]] = []
    for checkpoint in checkpoints:
        values = [t.value for t in trials[:checkpoint] if t.state == optuna.trial.TrialState.COMPLETE]
        best.append(min(values) if values else None)
    return {"function": function_name, "sampler": sampler_name, "seed": seed, "best": best,
            "infeasible": infeasible, "seconds": seconds}


def tpe_latency(history: int, repeats: int):
    """Seconds of one TPE study.ask() sampling 6 params with `history` completed hartmann6 trials, per repeat."""
    import numpy as np
    import optuna
    quiet()
    function = FUNCTIONS["hartmann6"]
    distributions = {f"x{d + 1}": optuna.distributions.FloatDistribution(lo, hi)
                     for d, (lo, hi) in enumerate(function.domain)}
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved)})  # one core
    seconds = []
    for repeat in range(repeats + 1):  # repeat 0: warm-up, not timed
        rng = np.random.default_rng(repeat)
        study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=repeat))
        trials = []
        for _ in range(history):
            params = {name: float(rng.uniform(d.low, d.high)) for name, d in distributions.items()}
            trials.append(optuna.trial.create_trial(params=params, distributions=distributions,
                                                    value=function.evaluate(list(params.values()))))
        study.add_trials(trials)
        start = time.perf_counter()
        trial = study.ask(fixed_distributions=distributions)
        elapsed = time.perf_counter() - start
        assert len(trial.params) == len(distributions)
        if repeat > 0:
            seconds.append(elapsed)
    os.sched_setaffinity(0, saved)
    return {"history": history, "dims": len(distributions), "seconds": seconds,
            "median": statistics.median(seconds) if seconds else None}


def check(points_file: str):
    with open(points_file, encoding="utf-8") as f:
        points = json.load(f)
    result = {}
    for name, xs in points.items():
        if name not in FUNCTIONS:
            raise SystemExit(f"optuna_functions: unknown function {name!r}")
        function = FUNCTIONS[name]
        result[name] = [{"value": None if function.infeasible(x) else function.evaluate(x),
                         "infeasible": function.infeasible(x)} for x in xs]
    return result


def split_list(text: str, known: Sequence[str], what: str) -> List[str]:
    items = [item for item in text.split(",") if item]
    for item in items:
        if item not in known:
            raise SystemExit(f"optuna_functions: unknown {what} {item!r} (known: {', '.join(known)})")
    return items


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--evals", type=int, default=100)
    parser.add_argument("--checkpoints", default="20,50,100", help="best value after these many evaluations")
    parser.add_argument("--functions", default=",".join(FUNCTIONS))
    parser.add_argument("--samplers", default=",".join(SAMPLERS))
    parser.add_argument("--jobs", type=int, default=2, help="studies at once, in worker processes")
    parser.add_argument("--latency-history", type=int, default=200)
    parser.add_argument("--latency-repeats", type=int, default=5, help="0: no latency measurement")
    parser.add_argument("--check", metavar="POINTS_JSON", help="only evaluate these points and print the values")
    args = parser.parse_args()
    try:
        import optuna
    except ImportError as error:
        print(f"optuna_functions: cannot import optuna with {sys.executable}: {error}; "
              "install python3-optuna or set DLTUNE_PYTHON", file=sys.stderr)
        return 3
    if args.check:
        json.dump(check(args.check), sys.stdout)
        sys.stdout.write("\n")
        return 0
    if args.seeds < 1 or args.evals < 1 or args.jobs < 1:
        parser.error("--seeds, --evals and --jobs must be >= 1")
    functions = split_list(args.functions, list(FUNCTIONS), "function")
    samplers = split_list(args.samplers, SAMPLERS, "sampler")
    checkpoints = [int(c) for c in args.checkpoints.split(",") if c]
    quiet()

    tasks = [(f, s, seed, args.evals, checkpoints) for s in samplers for f in functions for seed in range(args.seeds)]
    runs = []
    start = last_report = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        for run in pool.imap_unordered(run_study, tasks):
            runs.append(run)
            now = time.perf_counter()
            if now - last_report >= 5 or len(runs) == len(tasks):
                print(f"optuna: {len(runs)}/{len(tasks)} studies done ({now - start:.0f} s; last: {run['sampler']} "
                      f"{run['function']} seed {run['seed']}, {run['seconds']:.1f} s)", file=sys.stderr, flush=True)
                last_report = now
    runs.sort(key=lambda r: (r["function"], r["sampler"], r["seed"]))
    result = {"optuna": optuna.__version__, "evals": args.evals, "checkpoints": checkpoints, "runs": runs}
    if "tpe" in samplers and args.latency_repeats > 0:
        print(f"optuna: TPE latency with {args.latency_history} completed trials in 6 dims ...", file=sys.stderr,
              flush=True)
        result["tpe_latency"] = tpe_latency(args.latency_history, args.latency_repeats)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
