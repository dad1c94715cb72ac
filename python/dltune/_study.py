"""Reading a study from Python, through the `dltune` command's JSON export (the store's schema is read in one place)."""
from __future__ import annotations

import importlib
import io
import json
import os
import shutil
import subprocess
from typing import Any


class Study:
    """A study in a store, read on demand: `trials()` and `measurements()` return lists of dicts, one per row of
    `dltune export --what trials|measurements` (docs/json-output.md); `trials_frame()` and `measurements_frame()` the
    same rows as pandas DataFrames, where pandas is installed (the client itself needs only the standard library)."""

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

    def trials_frame(self) -> Any:
        """The trials as a pandas DataFrame: one row per trial, the columns in `dltune export`'s order (params last),
        `started_at` and `ended_at` as UTC datetimes. Needs pandas."""
        return self._frame("trials", ["started_at", "ended_at"])

    def measurements_frame(self) -> Any:
        """Every measurement as a pandas DataFrame in tidy form: trial, step, split, metric, value, examples. Needs
        pandas."""
        return self._frame("measurements", [])

    def _frame(self, what: str, times: list[str]) -> Any:
        try:
            pandas = importlib.import_module("pandas")
        except ImportError as error:
            raise ImportError(f"dltune.study({self.name!r}).{what}_frame() needs pandas (pip install pandas); "
                              f"{what}() gives the same rows as dicts without it") from error
        frame = pandas.read_csv(io.StringIO(self._run(what, "csv")))
        for column in times:
            if column in frame.columns:
                frame[column] = pandas.to_datetime(frame[column], utc=True)
        return frame

    def _export(self, what: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = json.loads(self._run(what, "json"))
        return rows

    def _run(self, what: str, output: str) -> str:
        command = [self.executable, "export", self.name, "--format", output, "--what", what]
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
        return done.stdout

    def __repr__(self) -> str:
        return f"Study({self.name!r}, storage={self.storage!r})"
