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
import pathlib

from transformers import TrainerCallback

from . import _checkpoints


def resume_checkpoint(trial, output_dir=None):
    """The `checkpoint-N` directory `trainer.train(resume_from_checkpoint=...)` resumes from, or None."""
    return _checkpoints.resume_from(trial, output_dir or trial.dir / "checkpoints", r"checkpoint-(\d+)")


class DltuneCallback(TrainerCallback):
    """Every rank runs it; only rank 0 reports (the client's rule), and every rank agrees on when to stop."""

    def __init__(self, trial):
        self.trial = trial
        self._stopping = False

    def on_train_begin(self, args, state, control, **kwargs):
        self.trial.started(state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        measurements = {name: logs[name] for name in ("loss", "learning_rate", "grad_norm") if name in logs}
        if "loss" in measurements:
            self.trial.report(state.global_step, **measurements)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        values = {name[len("eval_"):]: value for name, value in (metrics or {}).items()
                  if name.startswith("eval_") and isinstance(value, (int, float)) and name != "eval_epoch"
                  and not name.endswith(("_runtime", "_per_second"))}
        if values:
            self.trial.evaluate(state.global_step, "valid", **values)

    def on_save(self, args, state, control, **kwargs):
        path = (pathlib.Path(args.output_dir) / f"checkpoint-{state.global_step}").resolve()
        trial_dir = self.trial.dir.resolve()
        self.trial.checkpoint(state.global_step, path.relative_to(trial_dir) if trial_dir in path.parents else path)

    def on_step_end(self, args, state, control, **kwargs):
        if self.trial.should_stop():
            self._stopping = True
            control.should_training_stop = True
            control.should_save = True

    def on_train_end(self, args, state, control, **kwargs):
        if self._stopping:
            self.trial.stop(state.global_step)


__all__ = ["DltuneCallback", "resume_checkpoint"]
