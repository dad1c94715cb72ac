#!/usr/bin/python3
"""Peer for bench/store_bench.cc: Optuna creating and finishing trials on an SQLite RDB storage.

Times optuna.create_study(storage="sqlite:///DB") plus study.optimize(lambda t: t.suggest_float("x", 0, 1),
n_trials=N) with RandomSampler (so the time is the storage's, not a model's), Optuna's INFO log silenced, and prints
one line the benchmark parses:
    optuna_store trials=1000 sampler=RandomSampler storage=sqlite optuna=3.1.0 sqlalchemy=1.4.46 seconds=9.81
Exits 3 with a message on stderr if optuna is not importable (Debian: apt-get install python3-optuna, which only
/usr/bin/python3 can import).
"""
import argparse
import os
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="SQLite file to create (must not exist)")
    parser.add_argument("--trials", type=int, default=1000)
    args = parser.parse_args()
    try:
        import optuna
        import sqlalchemy
    except ImportError as error:
        print(f"optuna_store: cannot import optuna with {sys.executable}: {error}; "
              "install python3-optuna or set DLTUNE_PYTHON", file=sys.stderr)
        return 3
    if os.path.exists(args.db):
        print(f"optuna_store: {args.db} already exists", file=sys.stderr)
        return 2
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    start = time.perf_counter()
    study = optuna.create_study(storage=f"sqlite:///{os.path.abspath(args.db)}", study_name="bench",
                                sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=args.trials)
    elapsed = time.perf_counter() - start

    complete = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    if len(complete) != args.trials:
        print(f"optuna_store: {len(complete)} of {args.trials} trials complete", file=sys.stderr)
        return 1
    print(f"optuna_store trials={args.trials} sampler=RandomSampler storage=sqlite optuna={optuna.__version__} "
          f"sqlalchemy={sqlalchemy.__version__} seconds={elapsed:.6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
