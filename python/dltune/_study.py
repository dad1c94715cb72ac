"""Reading a study from Python, through the `dltune` command's JSON export (the store's schema is read in one place)."""
import json
import os
import shutil
import subprocess


class Study:
    """A study in a store, read on demand: `trials()` and `measurements()` return lists of dicts, one per row of
    `dltune export --what trials|measurements` (docs/store-schema.md)."""

    def __init__(self, name, storage=None, executable=None):
        self.name = name
        self.storage = storage
        self.executable = executable or os.environ.get("DLTUNE_EXECUTABLE") or shutil.which("dltune") or "dltune"

    def trials(self):
        """One dict per trial: number, state, params by name, the best step and objective, ..."""
        return self._export("trials")

    def measurements(self):
        """Every measurement in tidy form: one dict per (trial, step, split, metric)."""
        return self._export("measurements")

    def _export(self, what):
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
        return json.loads(done.stdout)

    def __repr__(self):
        return f"Study({self.name!r}, storage={self.storage!r})"
