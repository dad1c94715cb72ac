#!/usr/bin/env python3
"""The quickstart study as a PyTorch program on dltune's Python client, on one GPU: dltune's packing against the same
program one trial at a time and against Optuna + PyTorch as its users run it (n_jobs=1), in one run.

The program is examples/external/train.py (the quickstart's MLP, 784-256-10, Nesterov momentum vs Adam, 16 trials
each, 2000 steps of batch 128, evaluated every 200 steps) on `dltune.torch.device(trial)`, the GPU dltune gives it.
Seven runs, one after the other on the same GPU, the dltune ones from one project directory with a machine cache of
their own (DLTUNE_CACHE_DIR):

  packed    dltune run, resources.trials_per_gpu: auto (packing by measurement), --parallel = the cores: the
            program's first study on the machine
  known     the same again, in a store of its own: a later study of a program known to serve warm, whose server
            starts with its first trial
  reused    the same as known with the program's --reuse-process (dltune.run(..., reuse_process=True)): its first
            study, each slot's trials after its first run one after the other in the slot's server's own process,
            which keeps its CUDA context and the data on the GPU (docs/python.md, "Reusing the process")
  one       dltune run, resources.trials_per_gpu: 1 and --parallel 1: the same program one trial at a time
            (--one-trials-per-optimizer of them: its throughput is steady from the first trial on)
  optuna    bench/peers/optuna_quickstart.py --device cuda --jobs 1: the Optuna peer on the same GPU, as its users
            run it
  optuna8   the same peer with 8 worker processes at once (--parallel-mode processes, one SQLite storage)
  builtin   dltune run examples/quickstart.yaml: the same study on dltune's built-in trainer (training.device auto:
            the GPU dltune places each trial on), packed by measurement

The dltune runs start their trials warm (dltune's default, whatever DLTUNE_WARM_TRIALS says in this environment):
in the program's first study each slot's first trial by exec, the later ones forked from its program server, and
in the studies after (known, one) every trial from its server; the built-in
trainer's from dltune's trial server. It prints the GPU, CUDA and driver, each run's wall time, trials per minute,
best valid error, and the throughput ratios packed / one and packed / optuna (the goal: packed at least 6x one, best
valid error within 0.5 points of one) and builtin / optuna and builtin / optuna8; for each dltune run, as
bench/client_bench.py does on the CPU, its trials' start-up and training medians from the store (the start-up's
over the trials after the first ones as well), how many started warm, and the share of its slots' time (slots: the
most trials that ran at once) spent training, starting up, scheduling and idle. A run that fails is reported and the
others still run; --out FILE writes the results as JSON after every run. Run from the repository root on the GPU
machine (../shared/device/README.md):

  python3 bench/gpu_client_bench.py --dltune build/cuda/bin/dltune --out $OUT/gpu_client_bench.json

Options: --python (the interpreter with a CUDA torch; default: this one), --trials-per-optimizer (16),
--one-trials-per-optimizer and --optuna-trials-per-optimizer (the serial runs' trials, default: the same; their
trials run one after another at a steady rate, so a part of the study measures their throughput: the Optuna peer's
then over its own studies' seconds, without the interpreter's start, in its favour), --steps (2000), --skip
known,reused,one,optuna,optuna8,builtin (to rerun a part), --keep (the work directory stays).
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from client_bench import RunFailed, dltune_environment, most_at_once, print_split, spec, split_summary, trial_splits

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run_study(args, directory, name, spec_text, parallel):
    """Runs one study through `dltune run`, its files in DIRECTORY, from the project directory above it; returns its
    wall time and results."""
    directory.mkdir()
    (directory / "study.yaml").write_text(spec_text)
    storage = f"sqlite:///{directory / 'store.db'}"
    command = [args.dltune, "run", str(directory / "study.yaml"), "--no-report", "--storage", storage]
    if parallel:
        command += ["--parallel", str(parallel)]
    print(f"gpu_client_bench: {directory.name}: {' '.join(command)}", flush=True)
    epoch = time.time()
    began = time.perf_counter()
    done = subprocess.run(command, cwd=directory.parent, capture_output=True, text=True, check=False,
                          env=dltune_environment(True, directory.parent))
    wall = time.perf_counter() - began
    (directory / "run.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RunFailed(f"dltune run exited {done.returncode}; the end of its output:\n"
                        f"{(done.stdout + done.stderr)[-3000:]}")
    exported = subprocess.run([args.dltune, "export", name, "--format", "json", "--storage", storage],
                              capture_output=True, text=True, check=True)
    trials = json.loads(exported.stdout)
    best = min((t["best_value"] for t in trials if t["best_value"] is not None), default=None)
    packing = [line for line in done.stdout.splitlines() if "GPU" in line]
    splits = trial_splits(directory / "store.db", directory / "runs")
    split = split_summary(splits, wall, max(1, most_at_once(splits)), epoch)  # slots: the most at once
    print_split(directory.name, split, trials=False)
    return {"wall_seconds": wall, "trials": len(trials), "completed": sum(t["state"] == "completed" for t in trials),
            "best_valid_error": best, "gpu_lines": packing[-6:], "split": split}


def run_program(args, work, name, trials_per_optimizer, trials_per_gpu, parallel, options=""):
    return run_study(args, work / name, name,
                     spec(name, args.python, trials_per_optimizer, args.steps, work / name / "runs",
                          resources=f"resources: {{gpus_per_trial: 1, trials_per_gpu: {trials_per_gpu}}}\n",
                          options=options),
                     parallel)


def run_builtin(args, work):
    text = (ROOT / "examples/quickstart.yaml").read_text()
    text = text.replace("name: quickstart", f"name: builtin\nrun_dir: {work / 'builtin' / 'runs'}", 1)
    text = text.replace("max_train_steps: 2000", f"max_train_steps: {args.steps}", 1)
    text = text.replace("trials: 16 ", f"trials: {args.trials_per_optimizer} ", 1)
    return run_study(args, work / "builtin", "builtin", text, None)


def run_optuna(args, work, name, jobs, mode, trials_per_optimizer):
    out = work / f"{name}.json"
    command = [args.python, str(ROOT / "bench/peers/optuna_quickstart.py"), "--device", "cuda", "--jobs", str(jobs),
               "--parallel-mode", mode, "--trials-per-optimizer", str(trials_per_optimizer),
               "--steps", str(args.steps), "--out", str(out)]
    print(f"gpu_client_bench: {name}: {' '.join(command)}", flush=True)
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RunFailed(f"the Optuna peer exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
    result = json.loads(out.read_text())
    return {"wall_seconds": wall, "study_seconds": result["wall_seconds"], "trials": result["trials"],
            "best_valid_error": result["best_overall"], "mode": f"{jobs} {mode}",
            "partial": trials_per_optimizer < args.trials_per_optimizer}


def machine(python):
    probe = ("import torch, json; p = torch.cuda.get_device_properties(0); "
             "print(json.dumps({'gpu': p.name, 'memory_gib': p.total_memory / 2**30, 'cuda': torch.version.cuda, "
             "'torch': torch.__version__}))")
    facts = json.loads(subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout)
    smi = shutil.which("nvidia-smi")
    if smi:
        facts["driver"] = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                         capture_output=True, text=True, check=False).stdout.strip()
    facts["cpus"] = os.cpu_count()
    return facts


def rate_seconds(result):
    """The seconds a run's trials per minute are measured over: its wall time, or for a part of a study (its trials
    one after another at a steady rate) the peer's own studies' seconds."""
    return result["study_seconds"] if result.get("partial") else result["wall_seconds"]


def per_minute(result):
    return 60 * result["trials"] / rate_seconds(result)


def summarize(results):
    print(f"\n{'run':8} {'trials':>6} {'wall s':>8} {'trials/min':>11} {'best valid error':>17}")
    for name in RUNS:
        r = results.get(name)
        if r is None:
            continue
        if "failed" in r:
            print(f"{name:8} FAILED: {r['failed'].splitlines()[0]}")
            continue
        best = "-" if r["best_valid_error"] is None else f"{r['best_valid_error']:.4f}"
        over = f" (trials/min over its own {r['study_seconds']:.1f} s)" if r.get("partial") else ""
        print(f"{name:8} {r['trials']:6} {r['wall_seconds']:8.1f} {per_minute(r):11.1f} {best:>17}{over}")
    for faster, slower in (("packed", "one"), ("packed", "optuna"), ("packed", "optuna8"), ("known", "optuna"),
                           ("known", "optuna8"), ("reused", "optuna"), ("reused", "optuna8"), ("reused", "known"),
                           ("builtin", "optuna"), ("builtin", "optuna8"), ("builtin", "packed")):
        a, b = results.get(faster), results.get(slower)
        if not a or not b or "failed" in a or "failed" in b:
            continue
        ratio = per_minute(a) / per_minute(b)
        results[f"{faster}_vs_{slower}"] = ratio
        print(f"{faster} has {ratio:.1f}x the throughput of {slower}; best valid error {a['best_valid_error']:.4f} "
              f"vs {b['best_valid_error']:.4f}")
    for name in ("packed", "known", "reused", "builtin"):
        for line in results.get(name, {}).get("gpu_lines", []):
            print(f"  {name}: {line}")


RUNS = ("packed", "known", "reused", "builtin", "one", "optuna", "optuna8")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dltune", default=str(ROOT / "build/release/bin/dltune"))
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--trials-per-optimizer", type=int, default=16)
    parser.add_argument("--one-trials-per-optimizer", type=int)
    parser.add_argument("--optuna-trials-per-optimizer", type=int)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--skip", default="", help="comma list of runs to skip: " + ", ".join(RUNS))
    parser.add_argument("--out")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    args.dltune = str(pathlib.Path(args.dltune).resolve())  # the studies run in their own directories
    skip = set(filter(None, args.skip.split(",")))
    facts = machine(args.python)
    print(f"gpu_client_bench: {facts}", flush=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpu_client_bench."))
    results = {"machine": facts, "trials_per_optimizer": args.trials_per_optimizer, "steps": args.steps}
    runs = {
        "packed": lambda: run_program(args, work, "packed", args.trials_per_optimizer, "auto", os.cpu_count()),
        "known": lambda: run_program(args, work, "known", args.trials_per_optimizer, "auto", os.cpu_count()),
        "reused": lambda: run_program(args, work, "reused", args.trials_per_optimizer, "auto", os.cpu_count(),
                                      " --reuse-process"),
        "one": lambda: run_program(args, work, "one", args.one_trials_per_optimizer or args.trials_per_optimizer, 1, 1),
        "optuna": lambda: run_optuna(args, work, "optuna", 1, "threads",
                                     args.optuna_trials_per_optimizer or args.trials_per_optimizer),
        "optuna8": lambda: run_optuna(args, work, "optuna8", 8, "processes", args.trials_per_optimizer),
        "builtin": lambda: run_builtin(args, work),
    }
    try:
        for name in RUNS:
            if name in skip:
                continue
            try:
                results[name] = runs[name]()
            except (RunFailed, subprocess.CalledProcessError, OSError, ValueError, KeyError) as failure:
                results[name] = {"failed": str(failure)}
                print(f"gpu_client_bench: {name} FAILED: {failure}", flush=True)
            else:
                print(f"gpu_client_bench: {name}: {results[name]}", flush=True)
            if args.out:
                pathlib.Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"gpu_client_bench: work directory kept in {work}")
    summarize(results)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 1 if any("failed" in r for r in results.values() if isinstance(r, dict)) else 0


if __name__ == "__main__":
    sys.exit(main())
