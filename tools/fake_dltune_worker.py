#!/usr/bin/python3
"""A stand-in for a dltune worker, to check a trial program against docs/trial-protocol.md without the C++ runner.

It plays dltune's side of the protocol for one program and a few scenarios, each in a trial directory of a fresh run
directory: it writes params.json and trial.json, creates a FIFO for DLTUNE_REPORT, renders the command's
placeholders, runs it with /bin/sh -c in a process group of its own with the DLTUNE_* environment (stdout and stderr
appended to stdout.log / stderr.log in the trial directory), and reads the report lines as they come. Every line is
checked against the protocol (a JSON object with a type; types, required fields and finite numbers per type; start
at most once and before any measurement; train steps increasing; nothing after end). Like dltune it keeps a
measurement store per trial (a start line at step S deletes the measurements after S; no start line deletes them
all at the first measurement) and manages checkpoint retention (training.keep_latest_checkpoints newest plus
training.keep_best_checkpoints best by objective; the others are deleted, only inside the trial directory).

Scenarios (--scenarios, default all of them):

  stop     SIGTERM to the process group after the train line of step --stop-at: expects exit 75 and a checkpoint of
           the last step trained; then a run with DLTUNE_RESUMING=1 must send start at that step and complete (exit
           0), and the trial's merged train series must be steps 1..N with no gap and no duplicate, its evaluations
           at every eval_every_steps and at step N, with the objective among them.
  kill     SIGKILL after step --kill-at (as dltune's second Ctrl-C): the resumed run must start at the newest
           checkpoint left on disk, and the merged series must again be whole.
  diverge  the params of --diverge-params (a learning rate far too high): expects exit 0 and an end line with state
           infeasible and a reason.
  compare  the same trial run without interruption: the evaluations of `stop` and `kill` must equal it exactly
           (a resume that restores model, optimizer, data position and random state is bit-identical).

Usage, from the repository root, with the interpreter that has torch:

  /usr/bin/python3 tools/fake_dltune_worker.py                        # examples/external/train.py, all scenarios
  /usr/bin/python3 tools/fake_dltune_worker.py --scenarios stop --steps 400 --stop-at 123 --keep
  /usr/bin/python3 tools/fake_dltune_worker.py --params '{"learning_rate": 0.001, "optimizer": "adam"}' \\
      -- '/usr/bin/python3 examples/external/train.py --hidden 32'

The command after `--` is one shell command line, with the placeholders of the protocol ({param}, {trial_dir},
{trial_number}, {seed}, {max_train_steps}, {params_file}, {{ and }}). It runs in the current directory. Like dltune's
runner, a simple command is run as `exec COMMAND`, so that the program replaces the shell (--no-exec runs it as
written): Debian's /bin/sh (dash) does not exec the last command of `sh -c` itself, and a SIGTERM to the process
group would kill the shell before the program has exited 75. --keep leaves the run directory in place (it is
printed) to look at the logs and checkpoints.

Exit status: 0 when every scenario passed, 1 when one failed, 2 for a mistake in the arguments.
"""
import argparse
import json
import math
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

DEFAULT_COMMAND = "/usr/bin/python3 examples/external/train.py --hidden {hidden}"
DEFAULT_PARAMS = '{"learning_rate": 0.05, "one_minus_momentum": 0.1, "hidden": 64}'
DEFAULT_DIVERGE_PARAMS = '{"learning_rate": 10000.0, "one_minus_momentum": 0.1, "hidden": 64}'
SCENARIOS = ("stop", "kill", "diverge", "compare")
CLIENT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
MEASUREMENT_TYPES = ("train", "eval")
SAFE_SHELL = re.compile(r"^[A-Za-z0-9._+\-/=:,@%]+$")
NOT_PROGRAMS = {"cd", "export", "set", "exec", "if", "for", "while", "until", "case", "eval", ".", "source", "ulimit",
                "umask", "unset"}


class Failure(Exception):
    """A scenario's check failed."""


# ---------------------------------------------------------------------------------------------------------------
# Command rendering, as dltune renders `command:`


def format_value(value):
    """A param value as the protocol substitutes it: shortest exact number, true/false, text as is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if value != int(value) or abs(value) >= 1e16 else str(int(value))
    return str(value)


def render_command(template, params, specials):
    def replace(match):
        if match.group(0) == "{{":
            return "{"
        if match.group(0) == "}}":
            return "}"
        name = match.group(1)
        if name in specials:
            text = str(specials[name])
        elif name in params:
            text = format_value(params[name])
        else:
            raise SystemExit(f"fake_dltune_worker: the command's placeholder {{{name}}} names no param")
        return text if SAFE_SHELL.match(text) else shlex.quote(text)

    return re.sub(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_\-]*)\}", replace, template)


def exec_when_simple(command):
    """`exec COMMAND` when it is one simple command, as dltune's runner does (src/run/trial_setup.cc), so the program
    replaces the shell and receives the signals sent to the process group itself."""
    if any(c in command for c in ";&|()\n"):
        return command
    first = command.split(" ", 1)[0]
    if not first or "=" in first or first in NOT_PROGRAMS:
        return command
    return "exec " + command


# ---------------------------------------------------------------------------------------------------------------
# Line validation


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    return (is_int(value) or isinstance(value, float)) and not isinstance(value, bool)


def is_finite(value):
    return is_number(value) and math.isfinite(value)


class Attempt:
    """One run of the program: validates its lines in order and remembers what it reported."""

    def __init__(self, trial):
        self.trial = trial
        self.lines = []  # parsed objects, in order
        self.errors = []  # protocol violations: "line N: ..."
        self.notes = []  # ignored lines and other remarks
        self.start_step = None
        self.saw_measurement = False
        self.last_train_step = None
        self.ended = None  # the end line

    def error(self, number, message):
        self.errors.append(f"line {number}: {message}")

    def feed(self, number, text):
        try:
            line = json.loads(text)  # accepts NaN / Infinity, the JSON extension the protocol allows for losses
        except ValueError as error:
            return self.error(number, f"not JSON ({error}): {text[:120]!r}")
        if not isinstance(line, dict):
            return self.error(number, f"not a JSON object: {text[:120]!r}")
        kind = line.get("type")
        if not isinstance(kind, str):
            return self.error(number, "has no text `type`")
        if self.ended is not None:
            return self.error(number, f"`{kind}` after the end line")
        check = getattr(self, f"check_{kind}", None)
        if check is None:
            self.notes.append(f"line {number}: type {kind!r} is not known to version 1; ignored")
            return None
        problem = self.check_step(line) if kind not in ("end", "timing") else None
        problem = problem or check(line)
        if problem:
            return self.error(number, f"{kind}: {problem}")
        self.lines.append(line)
        self.trial.record(line, self)
        return None

    @staticmethod
    def check_step(line):
        step = line.get("step")
        if not is_int(step) or step < 0:
            return f"step must be a whole number >= 0, not {step!r}"
        return None

    @staticmethod
    def check_numbers(line, names, allow_non_finite=()):
        for name in names:
            if name in line:
                value = line[name]
                if name in allow_non_finite:
                    if not is_number(value):
                        return f"{name} must be a number, not {value!r}"
                elif not is_finite(value):
                    return f"{name} must be a finite number, not {value!r}"
        return None

    def check_start(self, line):
        if self.start_step is not None:
            return "a second start line"
        if self.saw_measurement:
            return "start after a measurement"
        if "manages_checkpoints" in line and not isinstance(line["manages_checkpoints"], bool):
            return "manages_checkpoints must be true or false"
        self.start_step = line["step"]
        return None

    def check_train(self, line):
        problem = self.check_numbers(line, ("loss", "learning_rate", "grad_norm", "step_time", "data_wait",
                                            "examples_per_second"), allow_non_finite=("loss",))
        if problem:
            return problem
        if "clipped" in line and not isinstance(line["clipped"], bool):
            return "clipped must be true or false"
        if self.last_train_step is not None and line["step"] <= self.last_train_step:
            return f"step {line['step']} does not increase (previous train step {self.last_train_step})"
        if self.start_step is not None and line["step"] <= self.start_step:
            return f"step {line['step']} is not after the start step {self.start_step}"
        self.last_train_step = line["step"]
        self.saw_measurement = True
        return None

    def check_eval(self, line):
        split, metrics = line.get("split"), line.get("metrics")
        if not isinstance(split, str) or not split:
            return f"split must be non-empty text, not {split!r}"
        if not isinstance(metrics, dict):
            return f"metrics must be an object, not {metrics!r}"
        for name, value in metrics.items():
            if not is_finite(value):
                return f"metric {name} must be a finite number, not {value!r}"
        if "examples" in line and (not is_int(line["examples"]) or line["examples"] < 0):
            return f"examples must be a whole number >= 0, not {line['examples']!r}"
        self.saw_measurement = True
        return None

    @staticmethod
    def check_checkpoint(line):
        path = line.get("path")
        if not isinstance(path, str) or not path:
            return f"path must be non-empty text, not {path!r}"
        problem = Attempt.check_numbers(line, ("objective",))
        if problem:
            return problem
        if "checksum" in line and not isinstance(line["checksum"], str):
            return "checksum must be text"
        for flag in ("best", "deleted"):
            if flag in line and not isinstance(line[flag], bool):
                return f"{flag} must be true or false"
        return None

    @staticmethod
    def check_timing(line):
        seconds = line.get("seconds")
        if not isinstance(seconds, dict):
            return f"seconds must be an object of phases and seconds, not {seconds!r}"
        for phase, value in seconds.items():
            if not is_finite(value) or value < 0:
                return f"seconds of {phase!r} must be a finite number >= 0, not {value!r}"
        return None

    def check_end(self, line):
        if line.get("state") not in ("completed", "infeasible", "stopped"):
            return f"state must be completed, infeasible or stopped, not {line.get('state')!r}"
        if "reason" in line and not isinstance(line["reason"], str):
            return "reason must be text"
        self.ended = line
        return None

    def train_steps(self):
        return [line["step"] for line in self.lines if line["type"] == "train"]

    def checkpoints(self):
        return [line for line in self.lines if line["type"] == "checkpoint"]


# ---------------------------------------------------------------------------------------------------------------
# The trial: its directory, measurement store and checkpoint retention


class Trial:
    def __init__(self, run_dir, number, params, args):
        self.number, self.params, self.args = number, params, args
        self.dir = os.path.join(run_dir, f"trial_{number}")
        os.makedirs(self.dir)
        self.measurements = []  # (step, line): what dltune keeps for the trial
        self.checkpoints = []  # checkpoint lines still on disk (retention's view)
        self.manages_checkpoints = False
        self.pending_fresh_start = False
        self.notes = []  # remarks of every attempt: ignored lines and the like

    def write_files(self, resuming):
        params_file = os.path.join(self.dir, "params.json")
        with open(params_file, "w", encoding="utf-8") as f:
            json.dump(self.params, f)
        trial = {
            "protocol": 1, "study": "fake_worker", "number": self.number, "substudy": "all", "seed": self.args.seed,
            "max_train_steps": self.args.steps,
            "objective": {"metric": self.args.objective, "direction": "minimize"},
            "workload": {"name": "", "args": {}},
            "training": {"eval_every_steps": self.args.eval_every, "threads": self.args.threads,
                         "keep_best_checkpoints": self.args.keep_best, "keep_latest_checkpoints": self.args.keep_latest,
                         "test_at_end": False, "valid_sample_examples": 0, "divergence_factor": 100},
            "params": self.params, "resuming": resuming,
        }
        trial_file = os.path.join(self.dir, "trial.json")
        with open(trial_file, "w", encoding="utf-8") as f:
            json.dump(trial, f, indent=2)
        return params_file, trial_file

    def record(self, line, attempt):
        kind = line["type"]
        if kind == "start":
            self.manages_checkpoints = bool(line.get("manages_checkpoints", False))
            self.measurements = [(s, m) for s, m in self.measurements if s <= line["step"]]
        elif kind in MEASUREMENT_TYPES:
            if attempt.start_step is None and self.pending_fresh_start:
                self.measurements = []  # no start line: a fresh start
            self.pending_fresh_start = False
            self.measurements.append((line["step"], line))
        elif kind == "checkpoint":
            if line.get("deleted"):
                self.checkpoints = [c for c in self.checkpoints if c["path"] != line["path"]]
            else:
                self.checkpoints = [c for c in self.checkpoints if c["path"] != line["path"]] + [line]
                if not self.manages_checkpoints:
                    self.apply_retention()

    def resolve(self, path):
        return os.path.normpath(os.path.join(self.dir, path))

    def apply_retention(self):
        by_step = sorted(self.checkpoints, key=lambda c: c["step"], reverse=True)
        keep = {id(c) for c in by_step[:self.args.keep_latest]}
        scored = sorted((c for c in self.checkpoints if "objective" in c), key=lambda c: c["objective"])
        keep.update(id(c) for c in scored[:self.args.keep_best])
        for checkpoint in self.checkpoints:
            path = self.resolve(checkpoint["path"])
            if id(checkpoint) not in keep and path.startswith(self.dir + os.sep):
                if os.path.isdir(path):
                    shutil.rmtree(path)
                elif os.path.exists(path):
                    os.remove(path)
        self.checkpoints = [c for c in self.checkpoints if id(c) in keep]

    def train_series(self):
        return [s for s, m in self.measurements if m["type"] == "train"]

    def evals(self):
        return {(s, m["split"]): m["metrics"] for s, m in self.measurements if m["type"] == "eval"}

    def run(self, command, resuming, signal_at=None, signal_number=None):
        """Runs one attempt; returns (attempt, exit status, step at which the signal was sent or None)."""
        params_file, trial_file = self.write_files(resuming)
        specials = {"trial_dir": self.dir, "trial_number": self.number, "seed": self.args.seed,
                    "max_train_steps": self.args.steps, "params_file": params_file}
        rendered = render_command(command, self.params, specials)
        if not self.args.no_exec:
            rendered = exec_when_simple(rendered)
        fifo = os.path.join(self.dir, "report.fifo")
        if os.path.exists(fifo):
            os.remove(fifo)
        os.mkfifo(fifo)
        env = dict(os.environ, DLTUNE_PROTOCOL="1", DLTUNE_REPORT=fifo, DLTUNE_PARAMS=params_file,
                   DLTUNE_TRIAL=trial_file, DLTUNE_TRIAL_DIR=self.dir, DLTUNE_RESUMING="1" if resuming else "0",
                   DLTUNE_TRIAL_NUMBER=str(self.number), DLTUNE_SEED=str(self.args.seed),
                   DLTUNE_MAX_TRAIN_STEPS=str(self.args.steps), DLTUNE_THREADS=str(self.args.threads),
                   OMP_NUM_THREADS=str(self.args.threads), MKL_NUM_THREADS=str(self.args.threads))
        # As dltune does: the Python client (python/dltune) importable with no install step.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [CLIENT_DIR, os.environ.get("PYTHONPATH")]))
        # The read end first (non-blocking), then a write end of our own, so the FIFO never reads as closed before
        # the program opens it; we stop reading when the program has exited and the FIFO is drained.
        read_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        keep_fd = os.open(fifo, os.O_WRONLY)
        attempt = Attempt(self)
        self.pending_fresh_start = True
        signalled_at = signal_time = None
        with open(os.path.join(self.dir, "stdout.log"), "ab") as out, \
                open(os.path.join(self.dir, "stderr.log"), "ab") as err:
            process = subprocess.Popen(["/bin/sh", "-c", rendered], cwd=os.getcwd(), env=env, stdout=out,
                                       stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
            deadline = time.monotonic() + self.args.timeout
            pending, number = b"", 0
            try:
                while True:
                    exited = process.poll() is not None
                    ready, _, _ = select.select([read_fd], [], [], 0 if exited else 0.2)
                    chunk = b""
                    if ready:
                        try:
                            chunk = os.read(read_fd, 65536)
                        except BlockingIOError:
                            chunk = b""
                    pending += chunk
                    *complete, pending = pending.split(b"\n")
                    for raw in complete:
                        number += 1
                        attempt.feed(number, raw.decode("utf-8", errors="replace"))
                        last = attempt.last_train_step
                        if signal_at is not None and signalled_at is None and last is not None and last >= signal_at:
                            os.killpg(process.pid, signal_number)
                            signalled_at, signal_time = last, time.monotonic()
                    if exited and not chunk:
                        break
                    if time.monotonic() > deadline:
                        os.killpg(process.pid, signal.SIGKILL)
                        process.wait()
                        raise Failure(f"timed out after {self.args.timeout} s")
            finally:
                os.close(read_fd)
                os.close(keep_fd)
                os.remove(fifo)
        if pending.strip():
            number += 1
            attempt.error(number, f"an unterminated last line {pending[:120]!r}")
        self.notes.extend(attempt.notes)
        if signalled_at is not None:
            self.notes.append(f"the program exited {time.monotonic() - signal_time:.2f} s after signal "
                              f"{signal_number} (sent after step {signalled_at})")
        return attempt, process.returncode, signalled_at

    def stderr_tail(self, lines=8):
        with open(os.path.join(self.dir, "stderr.log"), encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])


# ---------------------------------------------------------------------------------------------------------------
# Scenarios


def require(condition, message):
    if not condition:
        raise Failure(message)


def outcome(trial, attempt, status):
    """dltune's verdict on an attempt: completed, infeasible, stopped or failed (with why)."""
    if attempt.errors:
        return "failed", "; ".join(attempt.errors[:10])
    if status == 75 or (attempt.ended is not None and attempt.ended["state"] == "stopped"):
        if not any(os.path.exists(trial.resolve(c["path"])) for c in trial.checkpoints):
            return "failed", "exit 75 without a checkpoint on disk"
        return "stopped", ""
    if status == 0:
        if attempt.ended is not None and attempt.ended["state"] == "infeasible":
            return "infeasible", attempt.ended.get("reason", "")
        split, _, metric = trial.args.objective.partition("/")
        if not any(m["split"] == split and metric in m["metrics"] for _, m in trial.measurements
                   if m["type"] == "eval"):
            return "failed", f"completed without an evaluation of {trial.args.objective}"
        return "completed", ""
    if status < 0:
        hint = ""
        if status == -signal.SIGTERM:
            hint = " (if the shell died of it: end a compound command with `exec PROGRAM ...`)"
        return "failed", f"killed by signal {-status}{hint}\n{trial.stderr_tail()}"
    return "failed", f"exit status {status}\n{trial.stderr_tail()}"


def expect(trial, attempt, status, wanted):
    state, why = outcome(trial, attempt, status)
    require(state == wanted, f"expected {wanted}, got {state} (exit {status}) {why}".rstrip())


def check_whole_series(trial):
    """The merged series of a finished trial: train steps 1..N once each, evaluations on the schedule."""
    steps = trial.train_series()
    n = trial.args.steps
    if not trial.args.sparse_train_lines:
        missing = sorted(set(range(1, n + 1)) - set(steps))
        duplicated = sorted({s for s in steps if steps.count(s) > 1})
        require(not missing and not duplicated and steps == sorted(steps),
                f"merged train series: missing steps {missing[:10]}, duplicated {duplicated[:10]}")
    eval_steps = sorted({step for step, _ in trial.evals()})
    schedule = sorted(set(range(trial.args.eval_every, n + 1, trial.args.eval_every)) | {n})
    require(eval_steps == schedule, f"evaluations at steps {eval_steps}, expected {schedule}")


def interrupted_then_resumed(trial, command, at, signal_number):
    """The stop and kill scenarios; returns a description of what happened."""
    attempt, status, signalled_at = trial.run(command, resuming=False, signal_at=at, signal_number=signal_number)
    require(signalled_at is not None, f"the program ended (exit {status}) before step {at}: "
                                      f"{outcome(trial, attempt, status)}")
    if signal_number == signal.SIGTERM:
        expect(trial, attempt, status, "stopped")
        last_train = attempt.last_train_step
        last_checkpoint = attempt.checkpoints()[-1]["step"] if attempt.checkpoints() else None
        require(last_checkpoint == last_train, f"after SIGTERM the last checkpoint is of step {last_checkpoint}, "
                                               f"the last step trained {last_train}")
        resume_from = last_checkpoint
    else:
        require(status == -signal.SIGKILL, f"expected death by SIGKILL, got exit {status}")
        require(not attempt.errors, "; ".join(attempt.errors))
        on_disk = [c["step"] for c in trial.checkpoints if os.path.exists(trial.resolve(c["path"]))]
        require(on_disk, "killed before any checkpoint: raise --kill-at")
        resume_from = max(on_disk)
    first = f"signal {signal_number} after step {signalled_at}, exit {status}, resume point {resume_from}"

    attempt, status, _ = trial.run(command, resuming=True)
    expect(trial, attempt, status, "completed")
    # After SIGKILL a checkpoint may have reached the disk unreported (killed between the rename and the line), so
    # the resume point may be newer than the newest reported one, but never newer than the step trained.
    newest_possible = resume_from if signal_number == signal.SIGTERM else signalled_at + trial.args.eval_every
    require(attempt.start_step is not None and resume_from <= attempt.start_step <= newest_possible,
            f"resumed run sent start step {attempt.start_step}, expected {resume_from} (newest checkpoint)")
    steps = attempt.train_steps()
    require(steps and steps[0] == attempt.start_step + 1,
            f"resumed run's first train step is {steps[0] if steps else None}, expected {attempt.start_step + 1}")
    check_whole_series(trial)
    return f"{first}; resumed at {attempt.start_step}, completed, series whole"


def scenario_diverge(trial, command):
    attempt, status, _ = trial.run(command, resuming=False)
    expect(trial, attempt, status, "infeasible")
    require(attempt.ended.get("reason"), "the infeasible end line has no reason")
    return f"infeasible: {attempt.ended['reason']}"


def compare(reference, others):
    expected = reference.evals()
    for other in others:
        got = other.evals()
        require(got.keys() == expected.keys(), f"trial {other.number} evaluated {sorted(got)} "
                                               f"but the uninterrupted run {sorted(expected)}")
        different = [key for key in expected if expected[key] != got[key]]
        require(not different, f"trial {other.number} differs from the uninterrupted run at (step, split) "
                               f"{different[:5]}: {[(got[k], expected[k]) for k in different[:1]]}")
    return f"{len(expected)} evaluations identical to the uninterrupted run in trial(s) " \
           f"{', '.join(str(o.number) for o in others)}"


# ---------------------------------------------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("command", nargs="*", help=f"the command line (default: {DEFAULT_COMMAND})")
    parser.add_argument("--params", default=DEFAULT_PARAMS, help="the trial's params as JSON")
    parser.add_argument("--diverge-params", default=DEFAULT_DIVERGE_PARAMS, help="params that diverge")
    parser.add_argument("--steps", type=int, default=200, help="max_train_steps (default 200)")
    parser.add_argument("--eval-every", type=int, default=50, help="training.eval_every_steps (default 50)")
    parser.add_argument("--stop-at", type=int, help="SIGTERM after this step (default: 55%% of --steps)")
    parser.add_argument("--kill-at", type=int, help="SIGKILL after this step (default: 80%% of --steps)")
    parser.add_argument("--seed", type=int, default=8125319845467390315, help="DLTUNE_SEED")
    parser.add_argument("--threads", type=int, default=1, help="DLTUNE_THREADS")
    parser.add_argument("--keep-latest", type=int, default=2, help="training.keep_latest_checkpoints")
    parser.add_argument("--keep-best", type=int, default=1, help="training.keep_best_checkpoints")
    parser.add_argument("--objective", default="valid/error_rate")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated subset of "
                                                                          + ", ".join(SCENARIOS))
    parser.add_argument("--sparse-train-lines", action="store_true",
                        help="the program does not send a train line every step: skip the gap check")
    parser.add_argument("--run-dir", help="where to make the trial directories (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    parser.add_argument("--no-exec", action="store_true",
                        help="run the command as written, without the `exec` dltune puts before a simple command")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per attempt (default 300)")
    args = parser.parse_args(argv)
    args.command = " ".join(args.command) if args.command else DEFAULT_COMMAND
    args.stop_at = args.stop_at if args.stop_at is not None else max(1, args.steps * 55 // 100)
    args.kill_at = args.kill_at if args.kill_at is not None else max(1, args.steps * 80 // 100)
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    for scenario in args.scenarios:
        if scenario not in SCENARIOS:
            parser.error(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    for name in ("params", "diverge_params"):
        try:
            setattr(args, name, json.loads(getattr(args, name)))
        except ValueError as error:
            parser.error(f"--{name.replace('_', '-')} is not JSON: {error}")
    return args


def main(argv):
    args = parse_args(argv)
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="fake_dltune_worker.")
    os.makedirs(run_dir, exist_ok=True)
    run_dir = os.path.abspath(run_dir)
    print(f"fake_dltune_worker: command {args.command!r}, {args.steps} steps, eval every {args.eval_every}, "
          f"run dir {run_dir}")
    results, trials = [], {}

    def scenario(name, number, params, body):
        started = time.monotonic()
        try:
            trial = Trial(run_dir, number, params, args)
            trials[name] = trial
            detail = body(trial)
            results.append((name, True, detail, time.monotonic() - started))
        except Failure as failure:
            results.append((name, False, str(failure), time.monotonic() - started))
        name_, passed, detail, seconds = results[-1]
        print(f"  {'PASS' if passed else 'FAIL'} {name_} ({seconds:.1f} s): {detail}", flush=True)

    # Trial numbers are fixed per scenario, so --keep leaves recognizable directories.
    if "stop" in args.scenarios:
        scenario("stop", 0, args.params,
                 lambda t: interrupted_then_resumed(t, args.command, args.stop_at, signal.SIGTERM))
    if "kill" in args.scenarios:
        scenario("kill", 1, args.params,
                 lambda t: interrupted_then_resumed(t, args.command, args.kill_at, signal.SIGKILL))
    if "diverge" in args.scenarios:
        scenario("diverge", 2, args.diverge_params, lambda t: scenario_diverge(t, args.command))
    if "compare" in args.scenarios:
        def straight(trial):
            attempt, status, _ = trial.run(args.command, resuming=False)
            expect(trial, attempt, status, "completed")
            check_whole_series(trial)
            others = [trials[n] for n in ("stop", "kill") if n in trials and
                      any(r[0] == n and r[1] for r in results)]
            return compare(trial, others) if others else "completed (nothing to compare with)"
        scenario("compare", 3, args.params, straight)

    for name, trial in trials.items():
        for note in trial.notes:
            print(f"  note ({name}): {note}")
    failed = [name for name, passed, _, _ in results if not passed]
    if args.keep or failed:
        print(f"fake_dltune_worker: trial directories kept in {run_dir}")
    else:
        shutil.rmtree(run_dir, ignore_errors=True)
    print(f"fake_dltune_worker: {len(results) - len(failed)} of {len(results)} scenarios passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
