"""What the framework integrations share about checkpoint files: which one a trial may resume from, and checksums."""
import hashlib
import re


def resumable(trial, directory, pattern):
    """The checkpoints in `directory` this trial may resume from, newest first: names matching `pattern` (a regular
    expression whose group 1 is the step), at or before DLTUNE_RESUME_MAX_STEP; [] when the trial starts fresh (dltune
    did not say it resumes)."""
    if trial.managed and not trial.resuming:
        return []
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = re.fullmatch(pattern, path.name)
        if match is None:
            continue
        step = int(match.group(1))
        if trial.resume_max_step is None or step <= trial.resume_max_step:
            found.append((step, path))
    return [(step, path) for step, path in sorted(found, reverse=True)]


def resume_from(trial, directory, pattern):
    """The newest checkpoint in `directory` a framework resumes from (its path as text), having told dltune where
    training starts; None to start fresh."""
    found = resumable(trial, directory, pattern)
    if not found:
        return None
    step, path = found[0]
    trial.started(step)
    return str(path)


def sha256(path):
    """"sha256:" and the hex digest of the file, as the protocol's checkpoint line carries it."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()
