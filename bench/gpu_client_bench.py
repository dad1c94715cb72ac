#!/usr/bin/env python3
"""The quickstart study as a PyTorch program on dltune's Python client, on one GPU: dltune's packing against the same
program one trial at a time and against Optuna + PyTorch as its users run it (n_jobs=1), in one run.

The program is examples/external/train.py (the quickstart's MLP, 784-256-10, Nesterov momentum vs Adam, 16 trials
each, 2000 steps of batch 128, evaluated every 200 steps) on `dltune.torch.device(trial)`, the GPU dltune gives it.
Three runs, one after the other on the same GPU:

  packed    dltune run, resources.trials_per_gpu: auto (packing by measurement), --parallel = the cores
  one       dltune run, resources.trials_per_gpu: 1 and --parallel 1: the same program one trial at a time
  optuna    bench/peers/optuna_quickstart.py --device cuda --jobs 1: the Optuna peer on the same GPU

It prints the GPU, CUDA and driver, each run's wall time, trials per minute, best valid error, and the ratios
packed / one and packed / optuna (the goal: packed at least 6x one, best valid error within 0.5 points of one);
--out FILE writes them as JSON. Run from the repository root on the GPU machine (../shared/device/README.md):

  python3 bench/gpu_client_bench.py --dltune build/cuda/bin/dltune --out $OUT/gpu_client_bench.json

Options: --python (the interpreter with a CUDA torch; default: this one), --trials-per-optimizer (16), --steps
(2000), --skip optuna,one (to rerun a part), --keep (the work directory stays).
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

ROOT = pathlib.Path(__file__).resolve().parent.parent


def spec(name, python, trials, steps, trials_per_gpu, run_dir):
    return f"""name: {name}
command: {python} {ROOT / 'examples/external/train.py'} --hidden 256
evaluate_command: {python} {ROOT / 'examples/external/train.py'} --hidden 256
run_dir: {run_dir}
max_train_steps: {steps}
objective: {{metric: valid/error_rate, direction: minimize}}
trials: {trials}
seed: 0
sampler: halton
resources: {{gpus_per_trial: 1, trials_per_gpu: {trials_per_gpu}}}
training:
  eval_every_steps: {max(1, steps // 10)}
  threads: 1
space:
  optimizer: {{values: [nesterov, adam], role: scientific}}
  nesterov_learning_rate: {{name: learning_rate, when: {{optimizer: nesterov}}, min: 0.001, max: 1.0, scale: log}}
  one_minus_momentum: {{when: {{optimizer: nesterov}}, min: 0.01, max: 0.5, scale: log}}
  adam_learning_rate: {{name: learning_rate, when: {{optimizer: adam}}, min: 0.00001, max: 0.01, scale: log}}
  one_minus_beta1: {{when: {{optimizer: adam}}, min: 0.01, max: 0.5, scale: log}}
  epsilon: {{when: {{optimizer: adam}}, value: 1.0e-8}}
  batch_size: 128
  weight_decay: 0.0
"""


def run_dltune(args, work, name, trials_per_gpu, parallel):
    directory = work / name
    directory.mkdir()
    (directory / "study.yaml").write_text(
        spec(name, args.python, args.trials_per_optimizer, args.steps, trials_per_gpu, directory / "runs"))
    storage = f"sqlite:///{directory / 'store.db'}"
    command = [args.dltune, "run", "study.yaml", "--no-report", "--storage", storage]
    if parallel:
        command += ["--parallel", str(parallel)]
    print(f"gpu_client_bench: {name}: {' '.join(command)}", flush=True)
    began = time.perf_counter()
    done = subprocess.run(command, cwd=directory, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    (directory / "run.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.exit(f"gpu_client_bench: {name} failed ({done.returncode}); its output:\n{done.stdout}{done.stderr}")
    exported = subprocess.run([args.dltune, "export", name, "--format", "json", "--storage", storage],
                              capture_output=True, text=True, check=True)
    trials = json.loads(exported.stdout)
    best = min((t["best_value"] for t in trials if t["best_value"] is not None), default=None)
    packing = [line for line in done.stdout.splitlines() if "GPU packing" in line or line.startswith("GPUs:")]
    return {"wall_seconds": wall, "trials": len(trials), "completed": sum(t["state"] == "completed" for t in trials),
            "best_valid_error": best, "gpu_lines": packing}


def run_optuna(args, work):
    out = work / "optuna.json"
    command = [args.python, str(ROOT / "bench/peers/optuna_quickstart.py"), "--device", "cuda", "--jobs", "1",
               "--trials-per-optimizer", str(args.trials_per_optimizer), "--steps", str(args.steps), "--out", str(out)]
    print(f"gpu_client_bench: optuna: {' '.join(command)}", flush=True)
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"gpu_client_bench: the Optuna peer failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    result = json.loads(out.read_text())
    return {"wall_seconds": wall, "study_seconds": result["wall_seconds"], "trials": result["trials"],
            "best_valid_error": result["best_overall"]}


def machine(python):
    probe = ("import torch, json; p = torch.cuda.get_device_properties(0); "
             "print(json.dumps({'gpu': p.name, 'memory_gib': p.total_memory / 2**30, 'cuda': torch.version.cuda, "
             "'torch': torch.__version__}))")
    facts = json.loads(subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout)
    smi = shutil.which("nvidia-smi")
    if smi:
        facts["driver"] = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                         capture_output=True, text=True, check=False).stdout.strip()
    return facts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dltune", default=str(ROOT / "build/release/bin/dltune"))
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--trials-per-optimizer", type=int, default=16)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--skip", default="", help="comma list of runs to skip: one, optuna")
    parser.add_argument("--out")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    facts = machine(args.python)
    print(f"gpu_client_bench: {facts}", flush=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpu_client_bench."))
    results = {"machine": facts, "trials_per_optimizer": args.trials_per_optimizer, "steps": args.steps}
    try:
        results["packed"] = run_dltune(args, work, "packed", "auto", os.cpu_count())
        if "one" not in skip:
            results["one"] = run_dltune(args, work, "one", 1, 1)
        if "optuna" not in skip:
            results["optuna"] = run_optuna(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"gpu_client_bench: work directory kept in {work}")
    print(f"\n{'run':8} {'wall s':>8} {'trials/min':>11} {'best valid error':>17}")
    for name in ("packed", "one", "optuna"):
        if name in results:
            r = results[name]
            print(f"{name:8} {r['wall_seconds']:8.1f} {60 * r['trials'] / r['wall_seconds']:11.1f} "
                  f"{r['best_valid_error']:17.4f}")
    packed = results["packed"]
    for name in ("one", "optuna"):
        if name in results:
            ratio = results[name]["wall_seconds"] / packed["wall_seconds"]
            results[f"packed_vs_{name}"] = ratio
            print(f"packed is {ratio:.1f}x {name} (wall time); best valid error {packed['best_valid_error']:.4f} vs "
                  f"{results[name]['best_valid_error']:.4f}")
    for line in packed["gpu_lines"]:
        print(f"  {line}")
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
