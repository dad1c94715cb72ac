#!/usr/bin/python3
"""The quickstart study as a PyTorch program on dltune's Python client, on this machine's CPU: warm trials against
cold ones and against Optuna + PyTorch, in one run.

The program is examples/external/train.py (the quickstart's MLP, 784-256-10, Nesterov momentum vs Adam in the
quickstart's space, batch 128, --trials-per-optimizer trials each (16, the quickstart's own), --steps steps (200)
evaluated every steps / 10 on a 10,000-example train subset and the 10,000 valid examples, one thread per trial). It
calls dltune.run(train): in the first study of the program on the machine, its first trial in each slot starts cold
(by exec) and answers the worker's offer, and every later trial is forked from the program server's warm state; in a
later study of it, its server starts with the first trial (docs/trial-protocol.md, "Warm trial processes (Python
programs)"). Six runs, one after the other, from one project directory with a machine cache of their own
(DLTUNE_CACHE_DIR):

  warm      dltune run --parallel P (default: the cores), warm trials (dltune's default): the program's first study
  known     the same study again, in a store of its own: a later study of a program known to serve warm
  reused    the program with --reuse-process (dltune.run(..., reuse_process=True)): its first study, each slot's
            trials after the first run one after the other in its server's own process (docs/python.md)
  cold      the same with DLTUNE_WARM_TRIALS=0: every trial by exec, its imports and data decoding its own
  optuna1   bench/peers/optuna_quickstart.py --device cpu --jobs 1: Optuna's n_jobs=1, one trial at a time
  optuna2   the same peer with P worker processes (--parallel-mode processes --jobs P), one SQLite storage

For each: wall seconds (from starting the command to its end: dltune's or the interpreter's start, imports and data
loading included), trials per minute over them, the best valid error, and the CPU seconds it used (every process of
the run; for dltune also the worker's own) against the cores x wall seconds there were: what the rest of the machine
left it. For the dltune runs, each trial's time split
from the store (trials.time_split, docs/store-schema.md): start-up (from the worker starting the process, or asking
the program server for it, to the trial's start line) and its training side (everything after the start line:
training steps, evaluations, checkpoints and the process's exit; this program does not split them with
trial.add_seconds, so the store has them as `other` and `checkpoint`), whether it started warm (its stdout.log's
first line), and the medians; the warm start-up median over the trials after the first P (each slot's first trial
is cold by design) as well as over all; and the slots' training share = (sum of the training sides) /
(wall seconds x P), with the rest of the slots' time split into start-up, scheduling and idle (dltune's own
start-up and end, the gaps between trials). Then, for warm and known: against cold and the better Optuna run, and the
goals, met or not: start-up median (after the first trials) < 0.15 s; slots training >= 85% of the time;
throughput >= the better Optuna run; best valid error within 0.5 points of cold and of the better Optuna run.

It prints the machine (CPU model, cores, torch, optuna, the OpenBLAS kernel set torch uses in this environment:
OPENBLAS_CORETYPE as set, else OpenBLAS's own choice) and the load average before and after each run. --out FILE
writes the results as JSON after every run. Run from anywhere, with Debian's interpreter (torch and optuna):

  /usr/bin/python3 bench/client_bench.py --out /tmp/client_bench.json

Options: --dltune (default build/release/bin/dltune when it exists, else build/dev/bin/dltune, a RelWithDebInfo
build; the one used is printed), --python (the trials' interpreter, default /usr/bin/python3), --program (the dltune
runs' program instead of examples/external/train.py: a variant, to measure a change; the peer stays), --parallel P,
--trials-per-optimizer N, --steps N, --skip warm,known,reused,cold,optuna1,optuna2, --keep (the work directory stays).
"""
import argparse
import json
import os
import pathlib
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
RUNS = ("warm", "known", "reused", "cold", "optuna1", "optuna2")
WARM_RUNS = ("warm", "known", "reused")

# Phases of trials.time_split that are not the trial's process after its start line: scheduling (before the process),
# startup (up to the start line), store (the worker's writes, alongside the process), data_wait (a part of train).
NOT_TRAINING = ("scheduling", "startup", "store", "data_wait")


def spec(name, python, trials, steps, run_dir, resources="", program=ROOT / "examples/external/train.py",
         options=""):
    return f"""name: {name}
command: {python} {program} --hidden 256{options}
evaluate_command: {python} {program} --hidden 256
run_dir: {run_dir}
max_train_steps: {steps}
objective: {{metric: valid/error_rate, direction: minimize}}
trials: {trials}
seed: 0
sampler: halton
{resources}training:
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


class RunFailed(Exception):
    pass


def load():
    return [round(x, 2) for x in os.getloadavg()]


def dltune_environment(warm, work=None):
    """The environment of a dltune run: warm trials (the default: no DLTUNE_WARM_TRIALS) or cold ones; with WORK,
    the runs' own machine cache in it (so that the first study of the program is its first on this machine)."""
    environment = dict(os.environ)
    if work is not None:
        environment["DLTUNE_CACHE_DIR"] = str(work / "cache")
    environment.pop("DLTUNE_WARM_TRIALS", None)
    if not warm:
        environment["DLTUNE_WARM_TRIALS"] = "0"
    return environment


def own_cpu_seconds(pid):
    """The user + system CPU seconds process PID has used itself (not its children), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_run(command, **options):
    """Runs COMMAND to its end; returns its output and status with wall (s), cpu (the CPU seconds of the command and
    every process it waited for: its trials, servers and workers) and own_cpu (the command's own, sampled until it
    exits: for dltune, the worker's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    epoch = time.time()
    began = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options)
    own = 0.0
    outputs = {}

    def drain(name, stream):
        outputs[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(n, s))
               for n, s in (("out", process.stdout), ("err", process.stderr))]
    for reader in readers:
        reader.start()
    while process.poll() is None:
        own = own_cpu_seconds(process.pid) or own  # sampled: the last sample before it exits
        time.sleep(0.1)
    wall = time.perf_counter() - began
    for reader in readers:
        reader.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return argparse.Namespace(returncode=process.returncode, stdout=outputs["out"], stderr=outputs["err"], wall=wall,
                              cpu=cpu, own_cpu=own, began=epoch)


# --- the trials' time splits, from the store and the trial directories ----------------------------------------------

def trial_splits(store, run_dir):
    """Each trial of the one study in STORE (a SQLite file): number, state, started/ended (s), its time split, and
    whether its process was forked by a program server (its stdout.log's first line)."""
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as connection:
        rows = connection.execute("SELECT number, state, started_at, ended_at, time_split FROM trials "
                                  "ORDER BY started_at, number").fetchall()
    trials = []
    for number, state, started, ended, split in rows:
        logs = sorted(pathlib.Path(run_dir).glob(f"**/trial_{number}/stdout.log"))
        first = ""
        if logs:
            with open(logs[-1], encoding="utf-8", errors="replace") as log:
                first = log.readline()
        seconds = json.loads(split or "{}")
        trials.append({"trial": number, "state": state, "started_at": started, "ended_at": ended,
                       "warm": first.startswith("started warm"), "split": seconds,
                       "startup": seconds.get("startup", 0.0), "scheduling": seconds.get("scheduling", 0.0),
                       "training": sum(v for k, v in seconds.items() if k not in NOT_TRAINING)})
    return trials


def most_at_once(trials):
    """The most trials whose [started_at, ended_at] overlap: the slots a run used."""
    events = sorted([(t["started_at"], 1) for t in trials if t["started_at"] and t["ended_at"]]
                    + [(t["ended_at"], -1) for t in trials if t["started_at"] and t["ended_at"]])
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    return peak


def median(values):
    return statistics.median(values) if values else None


def split_summary(trials, wall, slots, began=None):
    """The start-up/training split of a dltune run over SLOTS slots for WALL seconds from BEGAN (time.time(), when
    dltune was started; with it, the idle time is split into before the first trial, after the last one and
    between)."""
    after_first = trials[slots:]  # in start order: each slot's first trial is cold by design
    slot_seconds = wall * slots
    startup = sum(t["startup"] for t in trials)
    scheduling = sum(t["scheduling"] for t in trials)
    training = sum(t["training"] for t in trials)
    phases = {}
    for t in trials:
        for phase, value in t["split"].items():
            phases[phase] = phases.get(phase, 0.0) + value
    idle = slot_seconds - startup - scheduling - training
    lead = tail = None
    if began is not None and trials:
        lead = min(t["started_at"] for t in trials) - began  # dltune's start: the layout, the store, the study
        tail = began + wall - max(t["ended_at"] for t in trials)  # its end: the summary, closing the store
    return {
        "slots": slots,
        "lead_seconds": lead,
        "tail_seconds": tail,
        "idle_between_share": None if lead is None else (idle - slots * (lead + tail)) / slot_seconds,
        "warm_started": sum(t["warm"] for t in trials),
        "startup_median": median([t["startup"] for t in trials]),
        "startup_median_after_first": median([t["startup"] for t in after_first]),
        "startup_median_warm_started": median([t["startup"] for t in trials if t["warm"]]),
        "startup_first": [t["startup"] for t in trials[:slots]],
        "training_median": median([t["training"] for t in trials]),
        "startup_seconds": startup,
        "scheduling_seconds": scheduling,
        "training_seconds": training,
        "phase_seconds": phases,
        "training_share": training / slot_seconds,
        "startup_share": startup / slot_seconds,
        "scheduling_share": scheduling / slot_seconds,
        "idle_share": 1.0 - (startup + scheduling + training) / slot_seconds,
        "per_trial": [{k: t[k] for k in ("trial", "state", "warm", "startup", "scheduling", "training")}
                      for t in trials],
    }


def print_split(name, split, trials=True):
    """Prints a dltune run's start-up/training split (split_summary)."""
    if trials:
        print(f"  {name}: trial  warm  start-up s  training s  scheduling s  state")
        for t in split["per_trial"]:
            print(f"  {name}: {t['trial']:5}  {'yes' if t['warm'] else 'no ':3}  {t['startup']:10.3f}  "
                  f"{t['training']:10.3f}  {t['scheduling']:12.3f}  {t['state']}")
    first = ", ".join(f"{s:.2f}" for s in split["startup_first"])
    after = split["startup_median_after_first"]
    print(f"  {name}: start-up median {split['startup_median']:.3f} s over all trials, "
          + (f"{after:.3f} s" if after is not None else "-")
          + f" after the first {split['slots']} (each slot's first trial starts cold: {first} s); "
          f"{split['warm_started']} trials started warm (forked, or in a reused process); "
          f"training median {split['training_median']:.2f} s")
    phases = ", ".join(f"{k} {v:.1f}" for k, v in sorted(split["phase_seconds"].items()))
    idle = f"idle {100 * split['idle_share']:.1f}%"
    if split.get("lead_seconds") is not None:
        between = 100 * split["idle_between_share"]
        idle += (f" (before the first trial {split['lead_seconds']:.2f} s and after the last "
                 f"{split['tail_seconds']:.2f} s in each slot, between trials {between:.1f}%)")
    print(f"  {name}: of {split['slots']} slots x the wall time: training {100 * split['training_share']:.1f}%, "
          f"start-up {100 * split['startup_share']:.1f}%, scheduling {100 * split['scheduling_share']:.1f}%, "
          f"{idle}; phases summed (s): {phases}")


# --- the runs ---------------------------------------------------------------------------------------------------------

def run_dltune(args, work, name, warm, options=""):
    directory = work / name
    directory.mkdir()
    run_dir = directory / "runs"
    (directory / "study.yaml").write_text(spec(name, args.python, args.trials_per_optimizer, args.steps, run_dir,
                                               program=args.program, options=options))
    store = directory / "store.db"
    # Every study runs from the one project directory, as a user's would: the program is known there after its
    # first study.
    command = [args.dltune, "run", str(directory / "study.yaml"), "--no-report", "--storage", f"sqlite:///{store}",
               "--parallel", str(args.parallel)]
    print(f"client_bench: {name}: {'' if warm else 'DLTUNE_WARM_TRIALS=0 '}{' '.join(command)}", flush=True)
    load_before = load()
    done = timed_run(command, cwd=work, env=dltune_environment(warm, work))
    wall = done.wall
    (directory / "run.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RunFailed(f"dltune run exited {done.returncode}; the end of its output:\n"
                        f"{(done.stdout + done.stderr)[-3000:]}")
    trials = trial_splits(store, run_dir)
    best = min((t_best for (t_best,) in sqlite3.connect(f"file:{store}?mode=ro", uri=True).execute(
        "SELECT best_value FROM trials WHERE state = 'completed' AND best_value IS NOT NULL")), default=None)
    return {"wall_seconds": wall, "trials": len(trials), "completed": sum(t["state"] == "completed" for t in trials),
            "best_valid_error": best, "load_before": load_before, "load_after": load(), "cpu_seconds": done.cpu,
            "worker_cpu_seconds": done.own_cpu, "split": split_summary(trials, wall, args.parallel, done.began)}


def run_optuna(args, work, name, jobs, mode):
    out = work / f"{name}.json"
    command = [args.python, str(ROOT / "bench/peers/optuna_quickstart.py"), "--device", "cpu", "--jobs", str(jobs),
               "--parallel-mode", mode, "--trials-per-optimizer", str(args.trials_per_optimizer),
               "--steps", str(args.steps), "--out", str(out)]
    print(f"client_bench: {name}: {' '.join(command)}", flush=True)
    load_before = load()
    done = timed_run(command)
    wall = done.wall
    (work / f"{name}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RunFailed(f"the Optuna peer exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
    result = json.loads(out.read_text())
    return {"wall_seconds": wall, "study_seconds": result["wall_seconds"], "trials": result["trials"],
            "completed": result["trials"] - result["failed_trials"], "best_valid_error": result["best_overall"],
            "mode": f"{jobs} {mode}", "openblas_core": result["openblas_core"], "load_before": load_before,
            "load_after": load(), "cpu_seconds": done.cpu}


# --- the machine --------------------------------------------------------------------------------------------------

def cpu_model():
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        fields = dict(line.split(":", 1) for line in info if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    return {"cpu": fields.get("model name", "?"), "cpu_family": fields.get("cpu family"),
            "cpu_model_number": fields.get("model"),
            "avx512": "avx512f" in fields.get("flags", "")}


def machine(python):
    probe = (f"import sys, json, torch, optuna; sys.path.insert(0, {str(ROOT / 'bench/peers')!r}); "
             "from optuna_quickstart import openblas_core; "
             "print(json.dumps({'torch': torch.__version__, 'optuna': optuna.__version__, "
             "'openblas_core': openblas_core()}))")
    facts = cpu_model()
    facts.update(json.loads(subprocess.run([python, "-c", probe], capture_output=True, text=True,
                                           check=True).stdout))
    facts["cores"] = os.cpu_count()
    facts["OPENBLAS_CORETYPE"] = os.environ.get("OPENBLAS_CORETYPE")
    return facts


# --- the summary ----------------------------------------------------------------------------------------------------

def per_minute(result):
    return 60 * result["trials"] / result["wall_seconds"]


def ok(result):
    return result is not None and "failed" not in result


def describe_machine(facts):
    cpu = f"{facts['cpu']} (family {facts['cpu_family']}, model {facts['cpu_model_number']}"
    cpu += ", AVX-512)" if facts["avx512"] else ")"
    return (f"{cpu}, {facts['cores']} cores; torch {facts['torch']}, optuna {facts['optuna']}; OpenBLAS kernels "
            f"{facts['openblas_core'] or '- (not OpenBLAS)'} ("
            + (f"OPENBLAS_CORETYPE={facts['OPENBLAS_CORETYPE']}" if facts["OPENBLAS_CORETYPE"] is not None
               else "OPENBLAS_CORETYPE unset: OpenBLAS's own choice") + "); "
            f"dltune {facts['dltune']} ({facts['dltune_build']})")


def summarize(results):
    print(f"\nmachine: {describe_machine(results['machine'])}")
    print(f"{results['trials_per_optimizer']} trials per optimizer of {results['steps']} steps, "
          f"{results['parallel']} at once; program {results['program']}")
    print(f"\n{'run':8} {'trials':>6} {'wall s':>8} {'trials/min':>11} {'best valid error':>17}  "
          f"CPU s used                 load before -> after")
    for name in RUNS:
        r = results.get(name)
        if r is None:
            continue
        if "failed" in r:
            print(f"{name:8} FAILED: {r['failed'].splitlines()[0]}")
            continue
        best = "-" if r["best_valid_error"] is None else f"{r['best_valid_error']:.4f}"
        cores = r["cpu_seconds"] / r["wall_seconds"]
        worker = f" (worker {r['worker_cpu_seconds']:.1f})" if "worker_cpu_seconds" in r else ""
        print(f"{name:8} {r['trials']:6} {r['wall_seconds']:8.1f} {per_minute(r):11.1f} {best:>17}  "
              f"{r['cpu_seconds']:6.1f}{worker} = {cores:.2f} cores  {r['load_before']} -> {r['load_after']}")
    for name in ("warm", "known", "reused", "cold"):
        if ok(results.get(name)):
            print()
            print_split(name, results[name]["split"])
    cold = results.get("cold")
    optunas = [results[n] | {"name": n} for n in ("optuna1", "optuna2") if ok(results.get(n))]
    better = max(optunas, key=per_minute) if optunas else None
    print()
    goals = {}
    for name in WARM_RUNS:
        warm = results.get(name)
        if not ok(warm):
            continue
        if ok(cold):
            results[f"{name}_vs_cold"] = per_minute(warm) / per_minute(cold)
            print(f"{name} has {results[f'{name}_vs_cold']:.2f}x the throughput of cold")
        if better:
            results[f"{name}_vs_optuna"] = per_minute(warm) / per_minute(better)
            print(f"{name} has {results[f'{name}_vs_optuna']:.2f}x the throughput of {better['name']} (the better "
                  f"Optuna run)")
        split = warm["split"]
        after = split["startup_median_after_first"]
        goals[f"{name}: start-up median < 0.15 s (trials after each slot's first)"] = (
            after is not None and after < 0.15, f"{after:.3f} s" if after is not None else "-")
        share = split["training_share"]
        goals[f"{name}: slots training >= 85% of the time"] = (share >= 0.85, f"{100 * share:.1f}%")
        if better:
            goals[f"{name}: throughput >= the better Optuna run"] = (
                per_minute(warm) >= per_minute(better),
                f"{per_minute(warm):.1f} vs {per_minute(better):.1f} trials/min ({better['name']})")
        if warm["best_valid_error"] is not None:
            others = [(n, results[n]) for n in ("cold",) if ok(results.get(n))] + (
                [(better["name"], better)] if better else [])
            others = [(n, r) for n, r in others if r["best_valid_error"] is not None]
            if others:
                gaps = {n: 100 * abs(warm["best_valid_error"] - r["best_valid_error"]) for n, r in others}
                goals[f"{name}: best valid error within 0.5 points (vs " + ", ".join(gaps) + ")"] = (
                    all(g <= 0.5 for g in gaps.values()),
                    ", ".join(f"{n} {g:.2f} points" for n, g in gaps.items()))
    for goal, (met, figure) in goals.items():
        print(f"goal: {goal}: {'met' if met else 'NOT met'} ({figure})")
    results["goals"] = {goal: {"met": met, "figure": figure} for goal, (met, figure) in goals.items()}


def build_type(dltune):
    """The CMake build type of DLTUNE (BUILD/bin/dltune, from BUILD/CMakeCache.txt), or "unknown build type"."""
    cache = pathlib.Path(dltune).parent.parent / "CMakeCache.txt"
    try:
        for line in cache.read_text(errors="replace").splitlines():
            if line.startswith("CMAKE_BUILD_TYPE:"):
                kind = line.split("=", 1)[1]
                return f"{cache.parent.name} build, {kind}" + (" (-O2)" if kind == "RelWithDebInfo" else "")
    except OSError:
        pass
    return "unknown build type"


def default_dltune():
    release = ROOT / "build/release/bin/dltune"
    return str(release if release.exists() else ROOT / "build/dev/bin/dltune")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dltune", default=default_dltune())
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--program", default=str(ROOT / "examples/external/train.py"),
                        help="the dltune runs' program (default examples/external/train.py): a variant of it, to "
                             "measure a change")
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--trials-per-optimizer", type=int, default=16)  # the quickstart's trials: 16
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--skip", default="", help="comma list of runs to skip: " + ", ".join(RUNS))
    parser.add_argument("--out")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    args.dltune = str(pathlib.Path(args.dltune).resolve())  # the studies run in their own directories
    args.program = str(pathlib.Path(args.program).resolve())
    skip = set(filter(None, args.skip.split(",")))
    if skip - set(RUNS):
        parser.error(f"--skip: unknown runs {sorted(skip - set(RUNS))}")
    facts = machine(args.python)
    facts["dltune"] = args.dltune
    facts["dltune_build"] = build_type(args.dltune)
    print(f"client_bench: {facts}", flush=True)
    print(f"client_bench: {args.trials_per_optimizer} trials per optimizer, {args.steps} steps, "
          f"{args.parallel} at once; load average {load()}", flush=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="client_bench."))
    results = {"machine": facts, "trials_per_optimizer": args.trials_per_optimizer, "steps": args.steps,
               "parallel": args.parallel, "program": args.program}
    runs = {
        "warm": lambda: run_dltune(args, work, "warm", True),
        "known": lambda: run_dltune(args, work, "known", True),
        "reused": lambda: run_dltune(args, work, "reused", True, " --reuse-process"),
        "cold": lambda: run_dltune(args, work, "cold", False),
        "optuna1": lambda: run_optuna(args, work, "optuna1", 1, "threads"),
        "optuna2": lambda: run_optuna(args, work, "optuna2", args.parallel, "processes"),
    }
    try:
        for name in RUNS:
            if name in skip:
                continue
            try:
                results[name] = runs[name]()
            except (RunFailed, subprocess.CalledProcessError, OSError, ValueError, KeyError,
                    sqlite3.Error) as failure:
                results[name] = {"failed": str(failure)}
                print(f"client_bench: {name} FAILED: {failure}", flush=True)
            else:
                r = results[name]
                print(f"client_bench: {name}: {r['trials']} trials in {r['wall_seconds']:.1f} s, best valid error "
                      f"{r['best_valid_error']}, load {r['load_before']} -> {r['load_after']}", flush=True)
            if args.out:
                pathlib.Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"client_bench: work directory kept in {work}")
    summarize(results)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 1 if any("failed" in r for r in results.values() if isinstance(r, dict)) else 0


if __name__ == "__main__":
    sys.exit(main())
