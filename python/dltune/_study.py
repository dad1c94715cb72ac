"""Reading a study from Python, through the `dltune` command's JSON export (the store's schema is read in one place)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any


class Study:
    """A study in a store, read on demand: `trials()` and `measurements()` return lists of dicts, one per row of
    `dltune export --what trials|measurements` (docs/store-schema.md)."""

    def __init__(self, name: str, storage: str | None = None, executable: str | None = None) -> None:
        self._name = name
        self._storage = storage
        self._executable = executable or os.environ.get("DLTUNE_EXECUTABLE") or shutil.which("dltune") or "dltune"

    @property
    def name(self) -> str:
        """The study's name."""
        return self._name

    @property
    def storage(self) -> str | None:
        """The store's URL (--storage), or None for dltune's default."""
        return self._storage

    @property
    def executable(self) -> str:
        """The `dltune` command that reads it: executable=, else DLTUNE_EXECUTABLE, else dltune on PATH."""
        return self._executable

    def trials(self) -> list[dict[str, Any]]:
        """One dict per trial: number, state, params by name, the best step and objective, ..."""
        return self._export("trials")

    def measurements(self) -> list[dict[str, Any]]:
        """Every measurement in tidy form: one dict per (trial, step, split, metric)."""
        return self._export("measurements")

    def _export(self, what: str) -> list[dict[str, Any]]:
        command = [self.executable, "export", self.name, "--format", "json", "--what", what]
        if self.storage:
            command += ["--storage", self.storage]
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        except FileNotFoundError as error:
            raise RuntimeError(f"dltune.study: cannot run {self.executable!r} (put dltune on PATH or pass "
                               f"executable=): {error}") from error
        if done.returncode != 0:
            raise RuntimeError(f"dltune.study({self.name!r}): {' '.join(command)} failed with exit status "
                               f"{done.returncode}: {done.stderr.strip()}")
        rows: list[dict[str, Any]] = json.loads(done.stdout)
        return rows

    def __repr__(self) -> str:
        return f"Study({self.name!r}, storage={self.storage!r})"
