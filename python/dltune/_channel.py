"""The report channel: where a trial's JSON lines go (docs/trial-protocol.md, "Report lines")."""
from __future__ import annotations

import json
import math
import os
import platform
import sys
from typing import IO, Any, Protocol, SupportsFloat, Union, cast


class SupportsItem(Protocol):
    """A one-element value read with .item(): a tensor, a NumPy scalar."""

    def item(self) -> Any: ...


# What a report takes as a number: a Python number, a NumPy scalar, a one-element tensor (on any device).
Scalar = Union[SupportsFloat, SupportsItem]


def _open_inherited_descriptor(path: str) -> IO[str]:
    """Opens DLTUNE_REPORT when it names one of dltune's descriptors (/dev/fd/N) that this process no longer has.

    A launcher between dltune and the program (torchrun, or any Python launcher using subprocess's default
    close_fds=True) closes the descriptor in its children. The launcher still holds it: the ancestors that carry this
    trial's DLTUNE_TRIAL_TOKEN are searched for it, nearest first, through /proc.
    """
    prefix = "/dev/fd/"
    token = os.environ.get("DLTUNE_TRIAL_TOKEN")
    if not path.startswith(prefix) or not token:
        raise FileNotFoundError(path)
    descriptor = path[len(prefix):]
    needle = ("DLTUNE_TRIAL_TOKEN=" + token).encode()
    pid = os.getppid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if needle not in environ.read().split(b"\0"):
                    break
            return open(f"/proc/{pid}/fd/{descriptor}", "a", encoding="utf-8")
        except OSError:
            pass
        pid = _parent_of(pid)
    raise FileNotFoundError(f"{path}: closed in this process and held by none of its launchers")


def _parent_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # The command name (field 2) is in parentheses and may hold spaces: the parent is after its last ')'.
            return int(stat.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


class Channel:
    """Writes report lines: to DLTUNE_REPORT under dltune, else (standalone) to standard output."""

    def __init__(self, path: str | None) -> None:
        self._file: IO[str] | None = None
        self._runtime_sent = False
        if path:
            try:
                self._file = open(path, "a", encoding="utf-8")
            except OSError:
                self._file = _open_inherited_descriptor(path)

    def write(self, record: dict[str, Any]) -> None:
        # allow_nan: a training loss may be NaN or Infinity (the protocol's one exception); the caller keeps other
        # fields finite.
        line = json.dumps(record, allow_nan=True, separators=(",", ":")) + "\n"
        if self._file is not None and not self._runtime_sent and record.get("type") != "warm":
            # Under dltune, the first line after a warm answer says which runtime the trial ran in
            # (docs/trial-protocol.md, "runtime").
            self._runtime_sent = True
            runtime = {"type": "runtime", "runtime": runtime_versions()}
            line = json.dumps(runtime, separators=(",", ":")) + "\n" + line
        target = self._file if self._file is not None else sys.stdout
        target.write(line)
        target.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def runtime_versions() -> dict[str, str]:
    """The versions of this process's runtime that decide a trial's numbers: Python's, and those of torch, CUDA,
    cuDNN and NumPy where the program has imported them (none is imported to ask)."""
    versions = {"python": platform.python_version(), "python_implementation": platform.python_implementation()}
    torch = sys.modules.get("torch")
    if torch is not None:
        versions["torch"] = str(getattr(torch, "__version__", "?"))
        cuda = getattr(getattr(torch, "version", None), "cuda", None)
        if cuda:
            versions["torch_cuda"] = str(cuda)
        try:
            cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        except Exception:  # noqa: BLE001 - a broken cuDNN only leaves its version out
            cudnn = None
        if cudnn:
            versions["cudnn"] = str(cudnn)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        versions["numpy"] = str(getattr(numpy, "__version__", "?"))
    return versions


def finite_or_none(value: Scalar) -> float | None:
    """A report's number as a float, or None when it is not finite (never sent: it would break the protocol)."""
    number = to_float(value)
    return number if math.isfinite(number) else None


def to_float(value: Scalar) -> float:
    """A Python number, a NumPy scalar or a one-element tensor as a float (a tensor is read from its device here)."""
    item = getattr(value, "item", None)
    if item is not None:
        return float(item())
    return float(cast(SupportsFloat, value))
