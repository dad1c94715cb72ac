"""Hugging Face Transformers on the client: a TrainerCallback that reports, evaluates, checkpoints and stops the
dltune way.

    dataset = ...                        # the set-up: imports, tokenized data; nothing that depends on the trial

    def train(trial):                    # one trial, forked warm from the set-up where dltune offers it
        args = TrainingArguments(output_dir=str(trial.dir / "checkpoints"), max_steps=trial.max_train_steps,
                                 eval_strategy="steps", eval_steps=trial.eval_every, save_strategy="steps",
                                 save_steps=trial.eval_every, logging_steps=trial.log_every, seed=trial.seed % 2**32,
                                 learning_rate=trial.params["learning_rate"])
        trainer = Trainer(model=build_model(), args=args, ..., callbacks=[dltune.huggingface.DltuneCallback(trial)])
        trainer.train(resume_from_checkpoint=dltune.huggingface.resume_checkpoint(trial))

    dltune.run(train)

The Trainer's logs become training lines (loss, learning_rate, grad_norm), its evaluations `eval` lines of split
`valid` (`eval_error_rate` is the metric `error_rate`), and each of its checkpoints (`checkpoint-N` directories) a
checkpoint line, so dltune keeps the newest and best and deletes the rest (leave save_total_limit unset). On SIGTERM
training stops after the current step, the Trainer saves, and the process exits 75 with the in-band stopped line.
"""
from __future__ import annotations

import os
import pathlib
from typing import Any

from transformers import TrainerCallback

from . import _checkpoints
from ._trial import Trial


def resume_checkpoint(trial: Trial, output_dir: str | os.PathLike[str] | None = None) -> str | None:
    """The `checkpoint-N` directory `trainer.train(resume_from_checkpoint=...)` resumes from, or None."""
    directory = pathlib.Path(output_dir) if output_dir else trial.dir / "checkpoints"
    return _checkpoints.resume_from(trial, directory, r"checkpoint-(\d+)")


class DltuneCallback(TrainerCallback):  # type: ignore[misc]  # transformers is not type-checked here
    """Every rank runs it; only rank 0 reports (the client's rule), and every rank agrees on when to stop."""

    def __init__(self, trial: Trial) -> None:
        self.trial = trial
        self._stopping = False

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.trial.record_start(state.global_step)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        logs = logs or {}
        measurements = {name: logs[name] for name in ("loss", "learning_rate", "grad_norm") if name in logs}
        if "loss" in measurements:
            self.trial.report(state.global_step, **measurements)

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: dict[str, Any] | None = None,
                    **kwargs: Any) -> None:
        values = {name[len("eval_"):]: value for name, value in (metrics or {}).items()
                  if name.startswith("eval_") and isinstance(value, (int, float)) and name != "eval_epoch"
                  and not name.endswith(("_runtime", "_per_second"))}
        if values:
            self.trial.record_evaluation(state.global_step, "valid", None, **values)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        path = (pathlib.Path(args.output_dir) / f"checkpoint-{state.global_step}").resolve()
        trial_dir = self.trial.dir.resolve()
        relative = path.relative_to(trial_dir) if trial_dir in path.parents else path
        self.trial.record_checkpoint(state.global_step, relative)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.trial.should_stop():
            self._stopping = True
            control.should_training_stop = True
            control.should_save = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._stopping:
            self.trial.stop(state.global_step)


__all__ = ["DltuneCallback", "resume_checkpoint"]
