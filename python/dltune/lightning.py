"""PyTorch Lightning on the client: a callback that reports, evaluates, checkpoints and stops the dltune way.

    datamodule = ...                     # the set-up: imports, data; nothing that depends on the trial

    def train(trial):                    # one trial, forked warm from the set-up where dltune offers it
        callback = dltune.lightning.DltuneCallback(trial)
        trainer = lightning.Trainer(max_steps=trial.max_train_steps, val_check_interval=trial.eval_every,
                                    check_val_every_n_epoch=None, callbacks=[callback], enable_checkpointing=False)
        trainer.fit(build_model(trial.params), datamodule, ckpt_path=dltune.lightning.resume_path(trial))

    dltune.run(train)

Training losses come from `training_step`'s returned loss; evaluations from the logged metrics after each validation
(`val_error_rate` or `val/error_rate` is the metric `error_rate` of split `valid`); a checkpoint
(trial.dir/checkpoints/step_NNNNNNNN.ckpt, Lightning's own format) follows each evaluation. On SIGTERM the trainer
stops after the current batch, saves, and the process exits 75 with the in-band stopped line.
"""
from __future__ import annotations

from typing import Any, Mapping

try:
    import lightning.pytorch as pl
except ImportError:  # the older package name
    import pytorch_lightning as pl

from . import _checkpoints
from ._trial import Trial

_PREFIXES = {"val": "valid", "valid": "valid", "train": "train", "test": "test"}


def resume_path(trial: Trial) -> str | None:
    """The checkpoint `trainer.fit(ckpt_path=...)` resumes from: the newest this trial may resume from, or None."""
    return _checkpoints.resume_from(trial, trial.dir / "checkpoints", r"step_(\d+)\.ckpt")


def split_metrics(metrics: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Lightning's logged metrics by split: {"val_loss": x, "val/error_rate": y} -> {"valid": {"loss": x, ...}}."""
    by_split: dict[str, dict[str, Any]] = {}
    for key, value in metrics.items():
        for separator in ("/", "_"):
            prefix, found, name = key.partition(separator)
            if found and prefix in _PREFIXES and name:
                by_split.setdefault(_PREFIXES[prefix], {})[name] = value
                break
    return by_split


class DltuneCallback(pl.Callback):  # type: ignore[misc]  # Lightning is not type-checked here
    """Reports each training step's loss and learning rate, each validation's metrics, saves a checkpoint after each
    evaluation, and stops the trainer when dltune asks (every rank agrees; rank 0 reports and writes)."""

    def __init__(self, trial: Trial) -> None:
        super().__init__()
        self.trial = trial
        self._stopping = False
        self._started = False

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if not self._started:
            self.trial.record_start(trainer.global_step)
            self._started = True

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        measurements: dict[str, Any] = {}
        if loss is not None:
            measurements["loss"] = loss.detach()
        if trainer.optimizers:
            measurements["learning_rate"] = trainer.optimizers[0].param_groups[0]["lr"]
        self.trial.report(trainer.global_step, **measurements)
        if self.trial.should_stop():
            self._stopping = True
            trainer.should_stop = True

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if trainer.sanity_checking:
            return
        step = trainer.global_step
        for split, metrics in split_metrics(trainer.callback_metrics).items():
            if split != "train":
                self.trial.record_evaluation(step, split, **metrics)
        self._save(trainer, step)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self._stopping:
            self._stop(trainer)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        # Lightning raises its own exception after SIGTERM in some versions: stop cleanly all the same.
        if self.trial.stop_requested or type(exception).__name__ == "SIGTERMException":
            self._stop(trainer)

    def _stop(self, trainer: Any) -> None:
        step: int = trainer.global_step
        if self.trial.last_saved_step != step:
            self._save(trainer, step)
        self.trial.stop(step)

    def _save(self, trainer: Any, step: int) -> None:
        path = self.trial.dir / "checkpoints" / f"step_{step:08d}.ckpt"
        path.parent.mkdir(parents=True, exist_ok=True)
        trainer.save_checkpoint(str(path))  # every rank calls it; rank 0 writes
        checksum = _checkpoints.sha256(path) if self.trial.is_main else None
        self.trial.record_checkpoint(step, path.relative_to(self.trial.dir), checksum=checksum)


__all__ = ["DltuneCallback", "resume_path", "split_metrics"]
