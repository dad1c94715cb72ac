"""What the framework integrations share about checkpoint files: which one a trial may resume from, and checksums."""
from __future__ import annotations

import hashlib
import os
import pathlib
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._trial import Trial

SUMS = "SHA256SUMS"  # the checksums of a trial's checkpoint files, by name, in sha256sum's format


def resumable(trial: Trial, directory: pathlib.Path, pattern: str) -> list[tuple[int, pathlib.Path]]:
    """The checkpoints in `directory` this trial may resume from, newest first: names matching `pattern` (a regular
    expression whose group 1 is the step), at or before DLTUNE_RESUME_MAX_STEP; [] when the trial starts fresh (dltune
    did not say it resumes)."""
    if trial.managed and not trial.resuming:
        return []
    if not directory.is_dir():
        return []
    found: list[tuple[int, pathlib.Path]] = []
    for path in directory.iterdir():
        match = re.fullmatch(pattern, path.name)
        if match is None:
            continue
        step = int(match.group(1))
        if trial.resume_max_step is None or step <= trial.resume_max_step:
            found.append((step, path))
    return [(step, path) for step, path in sorted(found, reverse=True)]


def resume_from(trial: Trial, directory: pathlib.Path, pattern: str) -> str | None:
    """The newest checkpoint in `directory` a framework resumes from (its path as text), having told dltune where
    training starts; None to start fresh."""
    found = resumable(trial, directory, pattern)
    if not found:
        return None
    step, path = found[0]
    trial.record_start(step)
    return str(path)


def sha256(path: str | os.PathLike[str]) -> str:
    """"sha256:" and the hex digest of the file, as the protocol's checkpoint line carries it."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def recorded_checksums(directory: pathlib.Path) -> dict[str, str]:
    """The checksums recorded in `directory`/SHA256SUMS ("sha256:" and the hex digest) by file name; {} without it.
    A line that is not "<64 hex digits>  <name>" records nothing."""
    try:
        text = (directory / SUMS).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    sums: dict[str, str] = {}
    for line in text.splitlines():
        digest, separator, name = line.partition("  ")
        if separator and name and re.fullmatch(r"[0-9a-f]{64}", digest):
            sums[name] = "sha256:" + digest
    return sums


def record_checksum(directory: pathlib.Path, name: str, checksum: str) -> None:
    """Records `checksum` for the file `name` of `directory` in its SHA256SUMS, replaced whole (temporary file, fsync,
    rename, directory fsync); the lines of files no longer there are dropped. `sha256sum -c --ignore-missing
    SHA256SUMS` checks the files with it."""
    sums = {known: digest for known, digest in recorded_checksums(directory).items() if (directory / known).exists()}
    sums[name] = checksum
    text = "".join(f"{digest[len('sha256:'):]}  {known}\n" for known, digest in sorted(sums.items()))
    temporary = directory / (SUMS + ".tmp")
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, directory / SUMS)
    sync_directory(directory)


def damage(path: pathlib.Path, recorded: dict[str, str]) -> str | None:
    """Why the file at `path` is not the one whose checksum `recorded` (by name) holds, or None when it is; "" when no
    checksum of it is recorded."""
    expected = recorded.get(path.name)
    if expected is None:
        return ""
    actual = sha256(path)
    if actual == expected:
        return None
    return f"its SHA-256 {actual} is not the {expected} recorded in {SUMS} when it was saved"


def sync_directory(directory: pathlib.Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
