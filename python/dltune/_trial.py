"""One trial as the program sees it: its params and settings, its reports, and how it ends."""
from __future__ import annotations

import atexit
import copy
import json
import math
import os
import pathlib
import signal
import sys
import time
import warnings
from types import FrameType
from typing import Any, Callable, Dict, Mapping, NoReturn

from . import _channel
from ._channel import Scalar

EXIT_STOPPED = 75  # EX_TEMPFAIL: stopped with a checkpoint, to resume (docs/exit-statuses.md)
LOSS_FLOOR = 1e-12  # the divergence test's floor on the first loss, as the built-in trainer's (training_rules.cc)

# Saves the registered model at a step, with the extra state trial.stop(step, **extra) was given.
Saver = Callable[[int, Dict[str, Any]], object]

_warned: set[str] = set()  # the deprecated names this process was told about


def _deprecated(old: str, new: str) -> None:
    """Warns once a process that trial.<old> is the old name of trial.<new>, kept for one release."""
    if old in _warned:
        return
    _warned.add(old)
    warnings.warn(f"trial.{old}() is deprecated and goes in the next release: call trial.{new}(), which does the same",
                  DeprecationWarning, stacklevel=3)


class Evaluation:
    """What `dltune evaluate` / `dltune launch` ask of an evaluate_command: one split of one checkpoint."""

    def __init__(self, checkpoint: str | os.PathLike[str], split: str) -> None:
        self._checkpoint = pathlib.Path(checkpoint)
        self._split = split

    @property
    def checkpoint(self) -> pathlib.Path:
        """The checkpoint file to evaluate (DLTUNE_CHECKPOINT)."""
        return self._checkpoint

    @property
    def split(self) -> str:
        """The split to evaluate it on (DLTUNE_SPLIT): "valid", "test", ..."""
        return self._split

    def __repr__(self) -> str:
        return f"Evaluation(checkpoint={str(self.checkpoint)!r}, split={self.split!r})"


class Trial:
    """A trial run by dltune (DLTUNE_* variables set) or standalone (params from --params, DLTUNE_PARAMS or the
    defaults). Only rank 0 of a data-parallel trial reports and saves; every rank may call everything.

    Its settings are read-only properties, read once from the environment; `params`, `training`, `gpus`,
    `checkpoint_owner`, `restored` and `description` are copies (changing one changes nothing of the trial).
    Not thread-safe: call it from the training loop's thread.
    """

    def __init__(self, defaults: Mapping[str, Any] | None = None, max_train_steps: int | None = None,
                 argv: list[str] | None = None, stop_check_every: int = 10, flush_seconds: float = 1.0) -> None:
        environ = os.environ
        self._managed = "DLTUNE_PROTOCOL" in environ
        description: dict[str, Any] = _read_json(environ.get("DLTUNE_TRIAL"), "DLTUNE_TRIAL", {})
        self._description = description
        given = _params_from_argv(sys.argv if argv is None else argv)
        if given is None:
            given = _read_json(environ.get("DLTUNE_PARAMS"), "DLTUNE_PARAMS", description.get("params", {}))
        self._params: dict[str, Any] = dict(defaults or {})
        self._params.update(given)
        self._number = _int_or(environ.get("DLTUNE_TRIAL_NUMBER"), description.get("number"))
        seed = _int_or(environ.get("DLTUNE_SEED"), description.get("seed", 0))
        self._seed = seed if seed is not None else 0
        steps = _int_or(environ.get("DLTUNE_MAX_TRAIN_STEPS"), description.get("max_train_steps", max_train_steps))
        if steps is None:
            raise ValueError("dltune.trial(): no step budget: pass max_train_steps= when running without dltune")
        self._max_train_steps = steps
        self._training: dict[str, Any] = dict(description.get("training", {}))
        self._eval_every = int(self._training.get("eval_every_steps") or max(1, steps // 10))
        self._eval_schedule = str(self._training.get("eval_schedule") or "every")
        self._log_every = int(self._training.get("log_every_steps") or self._eval_every)
        self._divergence_factor = float(self._training.get("divergence_factor", 100))
        objective = description.get("objective", {"metric": "valid/error_rate", "direction": "minimize"})
        self._objective = str(objective["metric"])
        self._objective_split, _, self._objective_metric = self._objective.partition("/")
        self._minimize: bool = objective.get("direction", "minimize") == "minimize"
        self._checkpoint_owner: dict[str, Any] | None = description.get("checkpoint_owner")
        self._gpus: list[dict[str, Any]] = list(description.get("gpus", []))
        self._dir = pathlib.Path(environ.get("DLTUNE_TRIAL_DIR") or "dltune-trial")
        self._dir.mkdir(parents=True, exist_ok=True)
        self._resuming = environ.get("DLTUNE_RESUMING") == "1"
        resume_max = environ.get("DLTUNE_RESUME_MAX_STEP")
        # None: any checkpoint may be resumed (standalone); 0: start fresh.
        self._resume_max_step = int(resume_max) if resume_max else None
        self._rank = int(environ.get("RANK", "0"))
        self._local_rank = int(environ.get("LOCAL_RANK", "0"))
        self._world_size = int(environ.get("WORLD_SIZE", "1"))
        self._evaluating: Evaluation | None = None
        if environ.get("DLTUNE_CHECKPOINT") and environ.get("DLTUNE_SPLIT"):
            self._evaluating = Evaluation(environ["DLTUNE_CHECKPOINT"], environ["DLTUNE_SPLIT"])
        self._restored: dict[str, Any] = {}  # the extra state of the checkpoint dltune.torch.restore loaded

        self._channel = _channel.Channel(environ.get("DLTUNE_REPORT")) if self.is_main else None
        # Train lines not yet written: (step, {name: value}, whether the loss was tested); values may live on a
        # device, and a loss there is tested for divergence when it is read, as the line is written.
        self._pending: list[tuple[int, dict[str, Scalar], bool]] = []
        self._untested = 0  # pending losses not tested yet
        self._flush_seconds = flush_seconds
        self._last_flush = time.monotonic()
        self._first_loss: float | None = None
        self._diverged: str | None = None  # the reason, once a reported loss diverged
        self._stop_requested = False
        self._stop_check_every = max(1, int(stop_check_every))
        self._stop_checks = 0
        self._started = False
        self._ended = False
        self._objective_by_step: dict[int, float] = {}
        self._seconds: dict[str, float] = {}
        self._saver: Saver | None = None  # saves the registered model at a step (dltune.torch registers it)
        self._last_saved_step: int | None = None
        _install_stop_handlers(self)
        atexit.register(self._flush_at_exit)

    # --- settings (read-only) --------------------------------------------------------------------------------------

    @property
    def managed(self) -> bool:
        """Whether dltune runs the trial (DLTUNE_PROTOCOL set); False standalone."""
        return self._managed

    @property
    def description(self) -> dict[str, Any]:
        """The trial's trial.json as dltune wrote it (docs/trial-protocol.md; {} standalone): a copy."""
        return copy.deepcopy(self._description)

    @property
    def params(self) -> dict[str, Any]:
        """The trial's params by name ({"learning_rate": 0.0123, "optimizer": "adam"}): a copy."""
        return dict(self._params)

    @property
    def number(self) -> int | None:
        """The trial's number in its study (None standalone)."""
        return self._number

    @property
    def seed(self) -> int:
        """The trial's seed (below 2^63; 0 standalone unless DLTUNE_SEED says otherwise)."""
        return self._seed

    @property
    def max_train_steps(self) -> int:
        """The step budget: train steps 1 to max_train_steps."""
        return self._max_train_steps

    @property
    def training(self) -> dict[str, Any]:
        """Every `training:` setting of trial.json (docs/study-spec.md): a copy."""
        return dict(self._training)

    @property
    def eval_every(self) -> int:
        """training.eval_every_steps (default max_train_steps / 10, at least 1)."""
        return self._eval_every

    @property
    def eval_schedule(self) -> str:
        """training.eval_schedule: "every" (the default), "dense:N" or "log:K"."""
        return self._eval_schedule

    @property
    def log_every(self) -> int:
        """training.log_every_steps (default eval_every)."""
        return self._log_every

    @property
    def divergence_factor(self) -> float:
        """training.divergence_factor (default 100): a loss above it times the first loss diverged."""
        return self._divergence_factor

    @property
    def objective(self) -> str:
        """The study's objective metric, "split/name" ("valid/error_rate" by default)."""
        return self._objective

    @property
    def objective_split(self) -> str:
        """The objective's split ("valid")."""
        return self._objective_split

    @property
    def objective_metric(self) -> str:
        """The objective's metric within its split ("error_rate")."""
        return self._objective_metric

    @property
    def minimize(self) -> bool:
        """Whether the study minimizes its objective (False: it maximizes it)."""
        return self._minimize

    @property
    def checkpoint_owner(self) -> dict[str, Any] | None:
        """Whose checkpoints this trial's are (study, trial, seed, params): a copy; None standalone."""
        return dict(self._checkpoint_owner) if self._checkpoint_owner is not None else None

    @property
    def gpus(self) -> list[dict[str, Any]]:
        """The GPUs dltune gave the trial, by rank ({"uuid", "name", "index", "memory_total_bytes"}): a copy."""
        return [dict(gpu) for gpu in self._gpus]

    @property
    def dir(self) -> pathlib.Path:
        """The trial's directory (DLTUNE_TRIAL_DIR, else ./dltune-trial): its checkpoints go under it."""
        return self._dir

    @property
    def resuming(self) -> bool:
        """Whether dltune resumes the trial (DLTUNE_RESUMING=1)."""
        return self._resuming

    @property
    def resume_max_step(self) -> int | None:
        """The newest step the trial may resume from (DLTUNE_RESUME_MAX_STEP); None: any (standalone)."""
        return self._resume_max_step

    @property
    def rank(self) -> int:
        """This process's rank among the trial's (RANK, 0 by default)."""
        return self._rank

    @property
    def local_rank(self) -> int:
        """This process's rank on its machine (LOCAL_RANK, 0 by default)."""
        return self._local_rank

    @property
    def world_size(self) -> int:
        """How many processes train the trial together (WORLD_SIZE, 1 by default)."""
        return self._world_size

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0, the one that reports and writes checkpoints."""
        return self._rank == 0

    @property
    def evaluating(self) -> Evaluation | None:
        """For an evaluate_command: the checkpoint and split to evaluate; None when the process trains."""
        return self._evaluating

    @property
    def restored(self) -> dict[str, Any]:
        """The extra state of the checkpoint dltune.torch.restore loaded ({} before, or fresh): a copy."""
        return dict(self._restored)

    # --- state (read-only) -----------------------------------------------------------------------------------------

    @property
    def stop_requested(self) -> bool:
        """Whether a stop was asked of this process (SIGTERM, Ctrl-C standalone, request_stop) or agreed by the
        ranks. should_stop() is the question to ask in the training loop; this one does no agreement."""
        return self._stop_requested

    @property
    def divergence(self) -> str | None:
        """Why the trial diverged (the reason its end line carries), once a loss or the objective did; else None.
        A loss still on a device is tested at the next flush()."""
        return self._diverged

    @property
    def first_loss(self) -> float | None:
        """The first training loss the trial reported (or resumed with): the divergence test's reference."""
        return self._first_loss

    @property
    def last_saved_step(self) -> int | None:
        """The step of the last checkpoint record_checkpoint was told of (on every rank); None before one."""
        return self._last_saved_step

    # --- for the framework integrations (dltune.torch, dltune.lightning, your own) ---------------------------------

    def register_saver(self, saver: Saver) -> None:
        """Sets how stop(step, **extra) saves the model: saver(step, extra), unless a checkpoint of that step was
        reported already. dltune.torch.restore and save register theirs; the last one registered is used."""
        self._saver = saver

    def set_resumed_state(self, restored: Mapping[str, Any], first_loss: float | None) -> None:
        """Takes what a resumed checkpoint held: the program's extra state (trial.restored) and the first loss of
        the run it continues (the divergence test's reference, so the test is the same after a resume)."""
        self._restored = dict(restored)
        self._first_loss = first_loss

    def request_stop(self) -> None:
        """Asks the trial to stop, as dltune's SIGTERM does: should_stop() says so from then on. For a program that
        handles SIGTERM itself (the client leaves a handler the program installed alone)."""
        self._stop_requested = True

    # --- reporting -------------------------------------------------------------------------------------------------

    def record_start(self, step: int) -> None:
        """Tells dltune where training starts: 0, or the step of the checkpoint it resumed from (its start line,
        written once). dltune.torch.restore calls it; call it yourself when you restore by other means."""
        if self._channel is not None and not self._started:
            self._channel.write({"type": "start", "step": int(step)})
        self._started = True

    def report(self, step: int, **measurements: Scalar) -> None:
        """Records one training step: loss, learning_rate, grad_norm, ... (numbers, NumPy scalars or one-element
        tensors). Written in batches, so a tensor on a GPU is read at most about once a second, never per step.

        A loss on the host (a number, a tensor on the CPU) is tested for divergence here: a single-process trial ends
        as infeasible in the report whose loss diverged. One on a device is tested when the batch is written. Nothing
        after the step that diverged is recorded."""
        if self._channel is None or self._diverged:
            return
        step = int(step)
        loss = measurements.get("loss")
        if loss is None or isinstance(loss, bool) or not _on_host(loss):
            self._pending.append((step, measurements, loss is None))
            self._untested += loss is not None
        else:
            if self._untested:
                self._write_pending()  # the losses before this one are tested first, in step order
                if self._end_if_diverged():
                    return
            value = _channel.to_float(loss)
            measurements["loss"] = value
            self._pending.append((step, measurements, True))
            if self._check_divergence(step, value):
                self.flush()
                return
        if time.monotonic() - self._last_flush >= self._flush_seconds:
            self.flush()

    def record_evaluation(self, step: int, split: str = "valid", examples: int | None = None,
                          **metrics: Scalar) -> None:
        """Records the results of an evaluation of `split` at `step` (e.g. error_rate=0.12, loss=0.35), which the
        program ran itself. dltune picks the trial's best step among the evaluations of the study's objective."""
        if not metrics:
            raise ValueError("trial.record_evaluation(): give at least one metric, e.g. error_rate=0.12")
        self._write_pending()  # the losses reported before it are tested first
        if self._end_if_diverged():
            return  # a diverged trial records no evaluation (with several ranks, it ends at the next agreement)
        values = {name: _channel.to_float(value) for name, value in metrics.items()}
        bad = [name for name, value in values.items() if not math.isfinite(value)]
        if split == self._objective_split and self._objective_metric in bad:
            self._diverged = f"{split}/{self._objective_metric} is {values[self._objective_metric]} at step {step}"
        if self._objective_metric in values and self._objective_metric not in bad:
            # The objective's split, or its periodic sample (training.valid_sample_examples) when the whole split
            # is not evaluated at this step, as the built-in trainer ranks its checkpoints.
            if split == self._objective_split:
                self._objective_by_step[int(step)] = values[self._objective_metric]
            elif split == self._objective_split + "_sample":
                self._objective_by_step.setdefault(int(step), values[self._objective_metric])
        if self._channel is None:
            return
        record: dict[str, Any] = {"type": "eval", "step": int(step), "split": split,
                                  "metrics": {name: value for name, value in values.items() if name not in bad}}
        if examples is not None:
            record["examples"] = int(examples)
        if record["metrics"]:
            self._channel.write(record)
        self._end_if_diverged()

    def evaluates_at(self, step: int) -> bool:
        """Whether the study's evaluation schedule (training.eval_every_steps and eval_schedule) evaluates at `step`;
        always at the last step."""
        return _evaluates(self._eval_schedule, int(step), self._eval_every, self._max_train_steps)

    def record_checkpoint(self, step: int, path: str | os.PathLike[str], checksum: str | None = None) -> None:
        """Reports a checkpoint the program wrote at `path` (relative to trial.dir, or absolute). dltune keeps the
        newest and the best ones (training.keep_latest_checkpoints, keep_best_checkpoints) and deletes the rest.
        Every rank may call it (rank 0 reports): each notes the step as saved (last_saved_step)."""
        self._last_saved_step = int(step)
        if self._channel is None:
            return
        self._write_pending()
        if self._end_if_diverged():
            return  # a diverged trial's checkpoint is not kept
        record: dict[str, Any] = {"type": "checkpoint", "step": int(step), "path": str(path)}
        if int(step) in self._objective_by_step:
            record["objective"] = self._objective_by_step[int(step)]
        if checksum:
            record["checksum"] = checksum
        self._channel.write(record)

    def add_seconds(self, phase: str, seconds: float) -> None:
        """Adds to the time split dltune records ("data_load", "train", "evaluation", "checkpoint", or your own)."""
        self._seconds[phase] = self._seconds.get(phase, 0.0) + float(seconds)

    def flush(self) -> None:
        """Writes the training steps reported so far (reading tensors from their device). A single-process trial
        whose loss diverged ends here as infeasible; with several ranks, trial.divergence says so."""
        self._write_pending()
        self._end_if_diverged()

    # Deprecated names, kept for one release: each warns once (DeprecationWarning) and does what its new name does.

    def evaluate(self, step: int, split: str = "valid", examples: int | None = None, **metrics: Scalar) -> None:
        """Deprecated: record_evaluation (it records an evaluation's results; it evaluates nothing)."""
        _deprecated("evaluate", "record_evaluation")
        self.record_evaluation(step, split, examples, **metrics)

    def checkpoint(self, step: int, path: str | os.PathLike[str], checksum: str | None = None) -> None:
        """Deprecated: record_checkpoint (it reports a checkpoint written already; it saves nothing)."""
        _deprecated("checkpoint", "record_checkpoint")
        self.record_checkpoint(step, path, checksum)

    def started(self, step: int) -> None:
        """Deprecated: record_start (it tells dltune where training starts)."""
        _deprecated("started", "record_start")
        self.record_start(step)

    # --- divergence ------------------------------------------------------------------------------------------------

    def _end_if_diverged(self) -> bool:
        """Ends a single-process trial whose loss diverged, as infeasible; with several ranks, returns whether it
        diverged (the ranks end it together at the next agreed should_stop)."""
        if self._diverged and self._world_size == 1:
            self.infeasible(self._diverged)
        return self._diverged is not None

    def _write_pending(self) -> None:
        if self._channel is None or not self._pending:
            self._last_flush = time.monotonic()
            return
        pending, self._pending, self._untested = self._pending, [], 0
        for step, measurements, tested in pending:
            record: dict[str, Any] = {"type": "train", "step": step}
            diverged = False
            for name, value in measurements.items():
                if isinstance(value, bool):
                    record[name] = value
                    continue
                number = _channel.to_float(value)
                if name == "loss":
                    record[name] = number  # may be NaN or Infinity: the protocol's way to report divergence
                    diverged = not tested and self._check_divergence(step, number)
                elif math.isfinite(number):
                    record[name] = number
            self._channel.write(record)
            if diverged:
                break  # nothing after the step that diverged is recorded
        self._last_flush = time.monotonic()

    def _check_divergence(self, step: int, loss: float) -> bool:
        """divergence_reason with the trial's first loss (this one when it has none yet) and divergence_factor.
        Returns whether this loss diverged."""
        if self._diverged:
            return False
        if self._first_loss is None:
            self._first_loss = loss
        self._diverged = divergence_reason(self._first_loss, loss, step, self._divergence_factor)
        return self._diverged is not None

    # --- stopping and ending -------------------------------------------------------------------------------------

    def should_stop(self) -> bool:
        """True once dltune asked the trial to stop (SIGTERM) or a reported loss diverged. In a data-parallel trial
        every rank gets the same answer: the ranks agree with an all-reduce every `stop_check_every` calls (call it
        at every step on every rank)."""
        local = self._stop_requested or self._diverged is not None
        if self._world_size == 1:
            return local
        self._stop_checks += 1
        if self._stop_checks % self._stop_check_every:
            return False
        stop, diverged = _agree(self._stop_requested, self._diverged is not None)
        if diverged and self._diverged is None:
            self._diverged = "another rank's loss diverged"
        self._stop_requested = self._stop_requested or stop
        return stop or diverged

    def stop(self, step: int, **extra: Any) -> NoReturn:
        """Ends the trial at `step`: a diverged one as infeasible; otherwise it saves the registered model at `step`
        with `extra` (as dltune.torch.save does; skipped when it was saved there already), tells dltune it stopped
        (an in-band end line, which survives a launcher such as torchrun) and exits with status 75. Does not
        return."""
        self._write_pending()  # a loss still on a device is tested before anything is saved
        if self._diverged:
            self.infeasible(self._diverged)
        if self._saver is not None and self._last_saved_step != int(step):
            self._saver(int(step), extra)
        self._end({"type": "end", "state": "stopped", "step": int(step)}, EXIT_STOPPED)

    def infeasible(self, reason: object) -> NoReturn:
        """Ends the trial as infeasible (it diverged, or these params cannot train): recorded with `reason`, and the
        study goes on. Exits with status 0; does not return."""
        self._end({"type": "end", "state": "infeasible", "reason": str(reason)}, 0)

    def _end(self, record: dict[str, Any], status: int) -> NoReturn:
        if self._channel is not None and not self._ended:
            self._write_pending()
            self._write_timing()
            self._channel.write(record)
        self._ended = True
        sys.stdout.flush()
        raise SystemExit(status)

    def _write_timing(self) -> None:
        if self._channel is not None and self._seconds:
            self._channel.write({"type": "timing", "seconds": dict(self._seconds)})
            self._seconds = {}

    def _flush_at_exit(self) -> None:
        if self._channel is None or self._ended:
            return
        try:
            self._write_pending()
            self._write_timing()
            if self._diverged:  # a loss read only now diverged: the end line makes the trial infeasible
                self._channel.write({"type": "end", "state": "infeasible", "reason": self._diverged})
                self._ended = True
        except (OSError, ValueError):
            pass  # the channel may be gone with dltune

    def _offer_warm(self, program: str | None = None, reuse_process: bool = False) -> None:
        """Tells the worker that the program's trials may start warm (dltune.run; docs/trial-protocol.md), the file
        the program runs, by which the worker knows it again in later studies, and whether its server runs them in
        its own process."""
        if self._channel is not None:
            self._channel.write({"type": "warm", **({"program": program} if program else {}),
                                 **({"reuse": True} if reuse_process else {})})

    def _end_in_process(self) -> None:
        """Ends a trial run in its program server's own process as the process's exit would: its last lines
        written, its report channel closed."""
        self._flush_at_exit()
        atexit.unregister(self._flush_at_exit)
        if self._channel is not None:
            self._channel.close()

    def __repr__(self) -> str:
        where = "dltune" if self._managed else "standalone"
        return f"Trial(number={self._number}, params={self._params!r}, rank={self._rank}, {where})"


def _on_host(value: object) -> bool:
    """Whether reading `value` waits on no accelerator: a Python or NumPy number, a tensor on the CPU."""
    device = getattr(value, "device", None)
    return device is None or getattr(device, "type", device) == "cpu"


def divergence_reason(first_loss: float, loss: float, step: int, factor: float) -> str | None:
    """The built-in trainer's divergence rule (src/train/training_rules.cc, Divergence), word for word: a loss that is
    not finite, or above `factor` times the run's first loss (floored at 1e-12), diverged. Returns the reason the
    trial ends with, or None. Both rules are tested on src/train/testdata/divergence_cases.json."""
    if not math.isfinite(loss):
        return f"diverged: training loss is {_shortest(loss)} at step {step}"
    if loss > factor * max(first_loss, LOSS_FLOOR):
        return (f"diverged: training loss {loss:.4g} at step {step} is more than {_shortest(factor)}x the initial "
                f"loss {first_loss:.4g}")
    return None


def _shortest(number: float) -> str:
    """A float as fmt's "{}" writes it in the built-in trainer's messages: 100, 1e+16, 2.5, inf, -nan."""
    if math.isnan(number):
        return "-nan" if math.copysign(1.0, number) < 0 else "nan"
    text = repr(float(number))
    return text[:-2] if text.endswith(".0") else text


def _agree(stop: bool, diverged: bool) -> tuple[bool, bool]:
    """The all-ranks maximum of the two flags, over torch.distributed's default group."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return stop, diverged
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    flags = torch.tensor([float(stop), float(diverged)], device=device)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    stop_flag, diverged_flag = flags.tolist()
    return stop_flag > 0, diverged_flag > 0


def _install_stop_handlers(trial: Trial) -> None:
    """SIGTERM (dltune's request to stop) and SIGINT (Ctrl-C, standalone) set the trial's stop flag; a second one
    gives up at once. A handler the program installed itself is left alone."""

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        if trial.stop_requested:
            raise KeyboardInterrupt
        trial.request_stop()

    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            current = signal.getsignal(signum)
            if current in (signal.SIG_DFL, signal.default_int_handler, None):
                signal.signal(signum, request_stop)
        except ValueError:
            pass  # not the main thread: the program handles signals itself


def _evaluates(schedule: str, step: int, every: int, max_train_steps: int) -> bool:
    """docs/study-spec.md's eval_schedule, as the built-in trainer follows it (core/eval_schedule.cc)."""
    if step == max_train_steps:
        return True
    kind, _, count = schedule.partition(":")
    if kind == "dense":
        return step <= int(count) or (every > 0 and step % every == 0)
    if kind == "log":
        k = int(count)
        if step < 1 or max_train_steps <= 1:
            return step == 1
        return any(math.floor(math.exp(i / (k - 1) * math.log(max_train_steps)) + 0.5) == step for i in range(k))
    return every > 0 and step % every == 0


def _params_from_argv(argv: list[str]) -> dict[str, Any] | None:
    """`--params FILE_OR_JSON` (taken out of sys.argv, so the program's own argument parser never sees it)."""
    for i, argument in enumerate(argv):
        value = None
        if argument == "--params" and i + 1 < len(argv):
            value = argv[i + 1]
            del argv[i:i + 2]
        elif argument.startswith("--params="):
            value = argument.split("=", 1)[1]
            del argv[i]
        if value is not None:
            text = value if value.lstrip().startswith("{") else pathlib.Path(value).read_text()
            params = json.loads(text)
            if not isinstance(params, dict):
                raise ValueError(f"--params: expected a JSON object of params by name, not {text[:80]!r}")
            return params
    return None


def _read_json(path: str | None, variable: str, default: Any) -> Any:
    if not path:
        return default
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, ValueError) as error:
        raise RuntimeError(f"{variable}={path}: cannot read it: {error}") from error


def _int_or(text: str | None, default: Any) -> int | None:
    return int(text) if text else (int(default) if default is not None else None)
