"""One trial as the program sees it: its params and settings, its reports, and how it ends."""
import atexit
import json
import math
import os
import pathlib
import signal
import sys
import time

from . import _channel

EXIT_STOPPED = 75  # EX_TEMPFAIL: stopped with a checkpoint, to resume (docs/exit-statuses.md)
LOSS_FLOOR = 1e-12  # the divergence test's floor on the first loss, as the built-in trainer's (src/train/trainer.cc)


class Evaluation:
    """What `dltune evaluate` / `dltune launch` ask of an evaluate_command: one split of one checkpoint."""

    def __init__(self, checkpoint, split):
        self.checkpoint = pathlib.Path(checkpoint)
        self.split = split

    def __repr__(self):
        return f"Evaluation(checkpoint={str(self.checkpoint)!r}, split={self.split!r})"


class Trial:
    """A trial run by dltune (DLTUNE_* variables set) or standalone (params from --params, DLTUNE_PARAMS or the
    defaults). Only rank 0 of a data-parallel trial reports and saves; every rank may call everything.

    Not thread-safe: call it from the training loop's thread.
    """

    def __init__(self, defaults=None, max_train_steps=None, argv=None, stop_check_every=10, flush_seconds=1.0):
        environ = os.environ
        self.managed = "DLTUNE_PROTOCOL" in environ
        self.description = _read_json(environ.get("DLTUNE_TRIAL"), "DLTUNE_TRIAL", {})
        given = _params_from_argv(sys.argv if argv is None else argv)
        if given is None:
            given = _read_json(environ.get("DLTUNE_PARAMS"), "DLTUNE_PARAMS", self.description.get("params", {}))
        self.params = dict(defaults or {})
        self.params.update(given)
        self.number = _int_or(environ.get("DLTUNE_TRIAL_NUMBER"), self.description.get("number"))
        self.seed = _int_or(environ.get("DLTUNE_SEED"), self.description.get("seed", 0))
        steps = _int_or(environ.get("DLTUNE_MAX_TRAIN_STEPS"), self.description.get("max_train_steps", max_train_steps))
        if steps is None:
            raise ValueError("dltune.trial(): no step budget: pass max_train_steps= when running without dltune")
        self.max_train_steps = steps
        self.training = dict(self.description.get("training", {}))
        self.eval_every = int(self.training.get("eval_every_steps") or max(1, steps // 10))
        self.eval_schedule = self.training.get("eval_schedule") or "every"
        self.log_every = int(self.training.get("log_every_steps") or self.eval_every)
        self.divergence_factor = float(self.training.get("divergence_factor", 100))
        objective = self.description.get("objective", {"metric": "valid/error_rate", "direction": "minimize"})
        self.objective_split, _, self.objective_metric = objective["metric"].partition("/")
        self.minimize = objective.get("direction", "minimize") == "minimize"
        self.checkpoint_owner = self.description.get("checkpoint_owner")
        self.gpus = list(self.description.get("gpus", []))
        self.dir = pathlib.Path(environ.get("DLTUNE_TRIAL_DIR") or "dltune-trial")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.resuming = environ.get("DLTUNE_RESUMING") == "1"
        resume_max = environ.get("DLTUNE_RESUME_MAX_STEP")
        # None: any checkpoint may be resumed (standalone); 0: start fresh.
        self.resume_max_step = int(resume_max) if resume_max not in (None, "") else None
        self.rank = int(environ.get("RANK", "0"))
        self.local_rank = int(environ.get("LOCAL_RANK", "0"))
        self.world_size = int(environ.get("WORLD_SIZE", "1"))
        self.is_main = self.rank == 0
        self.evaluating = None
        if environ.get("DLTUNE_CHECKPOINT") and environ.get("DLTUNE_SPLIT"):
            self.evaluating = Evaluation(environ["DLTUNE_CHECKPOINT"], environ["DLTUNE_SPLIT"])
        self.restored = {}  # the extra state of the checkpoint dltune.torch.restore loaded

        self._channel = _channel.Channel(environ.get("DLTUNE_REPORT")) if self.is_main else None
        # Train lines not yet written: (step, {name: value}, whether the loss was tested); values may live on a
        # device, and a loss there is tested for divergence when it is read, as the line is written.
        self._pending = []
        self._untested = 0  # pending losses not tested yet
        self._flush_seconds = flush_seconds
        self._last_flush = time.monotonic()
        self._first_loss = None
        self._diverged = None  # the reason, once a reported loss diverged
        self._stop_requested = False
        self._stop_check_every = max(1, int(stop_check_every))
        self._stop_checks = 0
        self._started = False
        self._ended = False
        self._objective_by_step = {}
        self._seconds = {}
        self._saver = None  # saves the registered model at a step (dltune.torch.restore / save register it)
        self._last_saved_step = None
        _install_stop_handlers(self)
        atexit.register(self._flush_at_exit)

    # --- reporting -----------------------------------------------------------------------------------------------

    def started(self, step):
        """Says where training starts: 0, or the step of the checkpoint it resumed from. dltune.torch.restore calls
        it; call it yourself when you restore by other means."""
        if self._channel is not None and not self._started:
            self._channel.write({"type": "start", "step": int(step)})
        self._started = True

    def report(self, step, **measurements):
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
            measurements["loss"] = _channel.to_float(loss)
            self._pending.append((step, measurements, True))
            if self._check_divergence(step, measurements["loss"]):
                self.flush()
                return
        if time.monotonic() - self._last_flush >= self._flush_seconds:
            self.flush()

    def evaluate(self, step, split="valid", examples=None, **metrics):
        """Records an evaluation of `split` at `step` (e.g. error_rate=0.12, loss=0.35). dltune picks the trial's best
        step among the evaluations of the study's objective."""
        if not metrics:
            raise ValueError("trial.evaluate(): give at least one metric, e.g. error_rate=0.12")
        self._write_pending()  # the losses reported before it are tested first
        if self._end_if_diverged():
            return  # a diverged trial records no evaluation (with several ranks, it ends at the next agreement)
        values = {name: _channel.to_float(value) for name, value in metrics.items()}
        bad = [name for name, value in values.items() if not math.isfinite(value)]
        if split == self.objective_split and self.objective_metric in bad:
            self._diverged = f"{split}/{self.objective_metric} is {values[self.objective_metric]} at step {step}"
        if self.objective_metric in values and self.objective_metric not in bad:
            # The objective's split, or its periodic sample (training.valid_sample_examples) when the whole split
            # is not evaluated at this step, as the built-in trainer ranks its checkpoints.
            if split == self.objective_split:
                self._objective_by_step[int(step)] = values[self.objective_metric]
            elif split == self.objective_split + "_sample":
                self._objective_by_step.setdefault(int(step), values[self.objective_metric])
        if self._channel is None:
            return
        record = {"type": "eval", "step": int(step), "split": split,
                  "metrics": {name: value for name, value in values.items() if name not in bad}}
        if examples is not None:
            record["examples"] = int(examples)
        if record["metrics"]:
            self._channel.write(record)
        self._end_if_diverged()

    def evaluates_at(self, step):
        """Whether the study's evaluation schedule (training.eval_every_steps and eval_schedule) evaluates at `step`;
        always at the last step."""
        return _evaluates(self.eval_schedule, int(step), self.eval_every, self.max_train_steps)

    def checkpoint(self, step, path, checksum=None):
        """Reports a checkpoint written at `path` (relative to trial.dir, or absolute). dltune keeps the newest and the
        best ones (training.keep_latest_checkpoints, keep_best_checkpoints) and deletes the rest."""
        self._last_saved_step = int(step)
        if self._channel is None:
            return
        self._write_pending()
        if self._end_if_diverged():
            return  # a diverged trial's checkpoint is not kept
        record = {"type": "checkpoint", "step": int(step), "path": str(path)}
        if int(step) in self._objective_by_step:
            record["objective"] = self._objective_by_step[int(step)]
        if checksum:
            record["checksum"] = checksum
        self._channel.write(record)

    def add_seconds(self, phase, seconds):
        """Adds to the time split dltune records ("data_load", "train", "evaluation", "checkpoint", or your own)."""
        self._seconds[phase] = self._seconds.get(phase, 0.0) + float(seconds)

    def flush(self):
        """Writes the training steps reported so far (reading tensors from their device). A single-process trial
        whose loss diverged ends here as infeasible."""
        self._write_pending()
        self._end_if_diverged()

    def _end_if_diverged(self):
        """Ends a single-process trial whose loss diverged, as infeasible; with several ranks, returns whether it
        diverged (the ranks end it together at the next agreed should_stop)."""
        if self._diverged and self.world_size == 1:
            self.infeasible(self._diverged)
        return self._diverged is not None

    def _write_pending(self):
        if self._channel is None or not self._pending:
            self._last_flush = time.monotonic()
            return
        pending, self._pending, self._untested = self._pending, [], 0
        for step, measurements, tested in pending:
            record = {"type": "train", "step": step}
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

    def _check_divergence(self, step, loss):
        """The built-in trainer's test (src/train/trainer.cc): a loss that is not finite, or above
        training.divergence_factor times the first loss (floored at 1e-12). Returns whether this loss diverged."""
        if self._diverged:
            return False
        if self._first_loss is None:
            self._first_loss = loss
        if not math.isfinite(loss):
            self._diverged = f"diverged: training loss is {loss} at step {step}"
        elif loss > self.divergence_factor * max(self._first_loss, LOSS_FLOOR):
            self._diverged = (f"diverged: training loss {loss:.4g} at step {step} is more than "
                              f"{_shortest(self.divergence_factor)}x the initial loss {self._first_loss:.4g}")
        return self._diverged is not None

    # --- stopping and ending -------------------------------------------------------------------------------------

    def should_stop(self):
        """True once dltune asked the trial to stop (SIGTERM) or a reported loss diverged. In a data-parallel trial
        every rank gets the same answer: the ranks agree with an all-reduce every `stop_check_every` calls (call it
        at every step on every rank)."""
        local = self._stop_requested or self._diverged is not None
        if self.world_size == 1:
            return local
        self._stop_checks += 1
        if self._stop_checks % self._stop_check_every:
            return False
        stop, diverged = _agree(self._stop_requested, self._diverged is not None)
        if diverged and self._diverged is None:
            self._diverged = "another rank's loss diverged"
        self._stop_requested = self._stop_requested or stop
        return stop or diverged

    def stop(self, step, **extra):
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

    def infeasible(self, reason):
        """Ends the trial as infeasible (it diverged, or these params cannot train): recorded with `reason`, and the
        study goes on. Exits with status 0; does not return."""
        self._end({"type": "end", "state": "infeasible", "reason": str(reason)}, 0)

    def _end(self, record, status):
        if self._channel is not None and not self._ended:
            self._write_pending()
            self._write_timing()
            self._channel.write(record)
        self._ended = True
        sys.stdout.flush()
        raise SystemExit(status)

    def _write_timing(self):
        if self._channel is not None and self._seconds:
            self._channel.write({"type": "timing", "seconds": dict(self._seconds)})
            self._seconds = {}

    def _flush_at_exit(self):
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

    def _offer_warm(self):
        """Tells the worker that the program's trials may start warm (dltune.run; docs/trial-protocol.md)."""
        if self._channel is not None:
            self._channel.write({"type": "warm"})

    def _register_saver(self, saver):
        self._saver = saver

    def __repr__(self):
        where = "dltune" if self.managed else "standalone"
        return f"Trial(number={self.number}, params={self.params!r}, rank={self.rank}, {where})"


def _on_host(value):
    """Whether reading `value` waits on no accelerator: a Python or NumPy number, a tensor on the CPU."""
    device = getattr(value, "device", None)
    return device is None or getattr(device, "type", device) == "cpu"


def _shortest(number):
    """A float as fmt's "{}" writes it in the built-in trainer's messages: 100, 1e+06, 2.5."""
    text = repr(float(number))
    return text[:-2] if text.endswith(".0") else text


def _agree(stop, diverged):
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


def _install_stop_handlers(trial):
    """SIGTERM (dltune's request to stop) and SIGINT (Ctrl-C, standalone) set the trial's stop flag; a second one
    gives up at once. A handler the program installed itself is left alone."""

    def request_stop(signum, _frame):
        if trial._stop_requested:
            raise KeyboardInterrupt
        trial._stop_requested = True

    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            current = signal.getsignal(signum)
            if current in (signal.SIG_DFL, signal.default_int_handler, None):
                signal.signal(signum, request_stop)
        except ValueError:
            pass  # not the main thread: the program handles signals itself


def _evaluates(schedule, step, every, max_train_steps):
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


def _params_from_argv(argv):
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


def _read_json(path, variable, default):
    if not path:
        return default
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, ValueError) as error:
        raise RuntimeError(f"{variable}={path}: cannot read it: {error}") from error


def _int_or(text, default):
    return int(text) if text not in (None, "") else (int(default) if default is not None else None)
