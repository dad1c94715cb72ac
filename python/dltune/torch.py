"""Checkpoints of a PyTorch trial: save atomically, restore exactly (model, optimizer, scheduler, random generators,
and whatever else the program passes, such as its data position).

    start = dltune.torch.restore(trial, model, optimizer)     # 0, or the step it resumes from
    ...
    dltune.torch.save(trial, step, model, optimizer, epoch=epoch)

A checkpoint is one file, trial.dir/checkpoints/step_NNNNNNNN.pt, written to a temporary file, synced and renamed, and
reported to dltune with its SHA-256, which checkpoints/SHA256SUMS records too; dltune deletes the ones it does not keep.
Only rank 0 writes; every rank restores, from the newest checkpoint whose file still has its recorded SHA-256.
"""
from __future__ import annotations

import os
import pathlib
import random
import sys
import time
from typing import Any

import torch

from . import _checkpoints
from ._trial import Trial

FORMAT = "dltune.torch/1"


def device(trial: Trial) -> torch.device:
    """The device this trial trains on: its rank's GPU when dltune gave it GPUs (or CUDA is there), else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", trial.local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def save(trial: Trial, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None,
         scheduler: Any = None, **extra: Any) -> pathlib.Path | None:
    """Saves the training state at `step` and reports the checkpoint (rank 0 only; other ranks return None).

    `extra` holds whatever else resuming needs (numbers, lists, tensors: e.g. the data loader's position); restore
    puts it in trial.restored. Returns the checkpoint's path.
    """
    _register(trial, model, optimizer, scheduler)
    directory = trial.dir / "checkpoints"
    path = directory / f"step_{int(step):08d}.pt"
    if not trial.is_main:
        trial.record_checkpoint(step, path.relative_to(trial.dir))  # rank 0 reports it; this rank notes the step
        return None
    trial.flush()  # a loss still on a device is tested first: a diverged trial saves nothing
    if trial.divergence is not None:
        return None
    began = time.monotonic()
    state = {
        "format": FORMAT,
        "step": int(step),
        "owner": trial.checkpoint_owner,
        "model": _unwrapped(model).state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "rng": _random_state(),
        "extra": extra,
        "first_loss": trial.first_loss,  # the divergence test's reference survives a resume
    }
    directory.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        torch.save(state, file)
        file.flush()
        os.fsync(file.fileno())
    checksum = _checkpoints.sha256(temporary)
    # Recorded before the file takes its name: a file under that name is never one whose checksum is not recorded.
    _checkpoints.record_checksum(directory, path.name, checksum)
    os.replace(temporary, path)
    _checkpoints.sync_directory(directory)
    trial.add_seconds("checkpoint", time.monotonic() - began)
    trial.record_checkpoint(step, path.relative_to(trial.dir), checksum=checksum)
    return path


def restore(trial: Trial, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None,
            scheduler: Any = None) -> int:
    """Loads the newest checkpoint this trial may resume from into `model` (and `optimizer`, `scheduler`), restores
    the random generators, puts the checkpoint's extra state in trial.restored, tells dltune where training starts,
    and returns that step: 0 when there is nothing to resume.

    Registers the objects, so that trial.stop(step) can save them. Under dltune a trial resumes only when dltune says
    so (DLTUNE_RESUMING) and from a checkpoint at or before DLTUNE_RESUME_MAX_STEP; standalone, from the newest one
    in trial.dir. A checkpoint whose file does not have the SHA-256 recorded when it was saved (checkpoints/SHA256SUMS),
    that does not load, or that belongs to another trial (its checkpoint_owner), is skipped with a warning for the
    next older one; one with no recorded SHA-256 is loaded unverified, with a notice.
    """
    _register(trial, model, optimizer, scheduler)
    step = 0
    recorded = _checkpoints.recorded_checksums(trial.dir / "checkpoints")
    for path in _candidates(trial):
        loaded = _load_if_intact_and_ours(trial, path, recorded)
        if loaded is not None:
            step = _apply(loaded, model, optimizer, scheduler, trial)
            if not trial.managed and trial.is_main:
                print(f"dltune: resuming from {path} (step {step}); remove {trial.dir} to start afresh",
                      file=sys.stderr)
            break
    trial.record_start(step)
    return step


def load(path: str | os.PathLike[str], model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None,
         scheduler: Any = None) -> int:
    """Loads one checkpoint (for an evaluate_command: trial.evaluating.checkpoint) and returns its step."""
    state = _read(path)
    return _apply(state, model, optimizer, scheduler, None, restore_random=False)


def _register(trial: Trial, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None, scheduler: Any) -> None:
    trial.register_saver(lambda step, extra: save(trial, step, model, optimizer, scheduler, **extra))


def _candidates(trial: Trial) -> list[pathlib.Path]:
    return [path for _, path in _checkpoints.resumable(trial, trial.dir / "checkpoints", r"step_(\d+)\.pt")]


def _load_if_intact_and_ours(trial: Trial, path: pathlib.Path, recorded: dict[str, str]) -> dict[str, Any] | None:
    damage: str | None
    try:
        damage = _checkpoints.damage(path, recorded)
    except OSError as error:
        damage = f"it cannot be read: {error}"
    if damage:
        # As the built-in trainer words it (src/train/checkpoint.cc).
        print(f"dltune: checkpoint {path} is corrupt ({damage}); falling back to an older checkpoint", file=sys.stderr)
        return None
    if damage == "":
        print(f"dltune: checkpoint {path} has no SHA-256 recorded in {_checkpoints.SUMS}: the file was not verified",
              file=sys.stderr)
    try:
        state = _read(path)
    except Exception as error:  # noqa: BLE001 - any unreadable file is skipped, whatever torch raises
        print(f"dltune: skipping checkpoint {path}: it does not load ({error})", file=sys.stderr)
        return None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        print(f"dltune: skipping checkpoint {path}: not one dltune.torch.save wrote", file=sys.stderr)
        return None
    owner = state.get("owner")
    if trial.checkpoint_owner and owner and owner != trial.checkpoint_owner:
        print(f"dltune: skipping checkpoint {path}: it belongs to another trial ({owner})", file=sys.stderr)
        return None
    return state


def _apply(state: dict[str, Any], model: torch.nn.Module, optimizer: torch.optim.Optimizer | None, scheduler: Any,
           trial: Trial | None, restore_random: bool = True) -> int:
    _unwrapped(model).load_state_dict(state["model"])
    if optimizer is not None and state.get("optimizer") is not None:
        optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state.get("scheduler") is not None:
        scheduler.load_state_dict(state["scheduler"])
    if restore_random:
        _set_random_state(state.get("rng") or {})
    if trial is not None:
        trial.set_resumed_state(state.get("extra") or {}, state.get("first_loss"))
    return int(state["step"])


def _unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    """The module inside DistributedDataParallel or DataParallel, so a checkpoint loads with or without them."""
    return model.module if isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)) \
        else model


def _random_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    return state


def _set_random_state(state: dict[str, Any]) -> None:
    if "torch" in state:
        torch.set_rng_state(state["torch"])
    if "python" in state:
        random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    numpy = sys.modules.get("numpy")
    if "numpy" in state and numpy is not None:
        numpy.random.set_state(state["numpy"])


def _read(path: str | os.PathLike[str]) -> Any:
    # The file is the trial's own (its owner is checked): it holds Python and NumPy generator states, which
    # torch.load's weights-only default of torch 2.6 and later refuses.
    return torch.load(path, map_location="cpu", weights_only=False)


__all__ = ["device", "save", "restore", "load"]
