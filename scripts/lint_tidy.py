#!/usr/bin/env python3
"""Runs clang-tidy on the given sources, skipping those it already found clean with the same inputs.

Usage: scripts/lint_tidy.py [--share K/N] [--jobs J] BUILD_DIR SOURCE...
  (from the project's root; BUILD_DIR holds compile_commands.json)
--share K/N analyses the K-th of N shares of the sources (every N-th of them in path order, from the K-th), so that N
processes, or N ctest tests, cover each source exactly once; --jobs J runs J clang-tidy processes at once (default:
the cores this process may use).

A source's inputs are what decide clang-tidy's answer: its compile command (with the checkout's path taken out, so
that another clone of the same commit shares the answer), the contents of every file its object was compiled from (the
source and each header, as ninja recorded them at the last build), .clang-tidy and clang-tidy's version. Each clean
answer is kept as an empty file named by the SHA-256 of those inputs in $DLTUNE_LINT_CACHE (default
~/.cache/dltune-lint), like ccache keeps objects; a finding is never kept, so it is reported on every run. A source
whose headers ninja does not know (not built yet, or built since it changed) is always analysed. Entries unused for
30 days are removed. Exits non-zero when clang-tidy reports anything.
"""
import concurrent.futures
import hashlib
import json
import os
import pathlib
import shlex
import subprocess
import sys
import time

CACHE_DAYS = 30


def cache_dir():
    configured = os.environ.get("DLTUNE_LINT_CACHE")
    if configured:
        return pathlib.Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "dltune-lint"


def object_of(command):
    words = shlex.split(command)
    return words[words.index("-o") + 1] if "-o" in words else None


def ninja_dependencies(build_dir):
    """Maps each object ninja built to the files it was compiled from, where ninja's record is current."""
    listing = subprocess.run(["ninja", "-C", build_dir, "-t", "deps"], capture_output=True, text=True)
    if listing.returncode != 0:
        return {}
    dependencies, current = {}, None
    for line in listing.stdout.splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(" "):
            target, _, state = line.partition(": #deps")
            current = target if state.rstrip().endswith("(VALID)") else None
            if current:
                dependencies[current] = []
        elif current:
            dependencies[current].append(line.strip())
    return dependencies


class ContentHashes:
    def __init__(self, build_dir):
        self.build_dir = build_dir
        self.known = {}

    def __call__(self, path):
        path = os.path.normpath(os.path.join(self.build_dir, path))
        if path not in self.known:
            try:
                self.known[path] = hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()
            except OSError:
                self.known[path] = "missing"
        return self.known[path]


def input_keys(build_dir, sources):
    """Each source's key, or None where its inputs are not all known."""
    root = os.getcwd()
    entries = {os.path.realpath(e["file"]): e for e in json.loads(pathlib.Path(build_dir, "compile_commands.json").read_text())}
    dependencies = ninja_dependencies(build_dir)
    content = ContentHashes(build_dir)
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True).stdout
    config = pathlib.Path(".clang-tidy").read_bytes()
    keys = {}
    for source in sources:
        entry = entries.get(os.path.realpath(source))
        files = dependencies.get(object_of(entry["command"])) if entry else None
        if not files:
            keys[source] = None
            continue
        digest = hashlib.sha256()
        digest.update(version.encode() + b"\0" + config + b"\0")
        digest.update(entry["command"].replace(root, "<root>").encode() + b"\0")
        for name in sorted(files):
            # ninja records a file as the compiler named it: absolute, or relative to the build directory where
            # ccache's base_dir rewrote the command (CMakeLists.txt); the same file gets the same name either way.
            shown = os.path.normpath(os.path.join(os.path.abspath(build_dir), name)).replace(root, "<root>")
            digest.update(f"{shown}\0{content(name)}\0".encode())
        keys[source] = digest.hexdigest()
    return keys


def tidy(build_dir, source):
    run = subprocess.run(["clang-tidy", "-p", build_dir, "--quiet", source], capture_output=True, text=True)
    return run.returncode, run.stdout


def remember(marker, create=False):
    """Marks a clean answer as used now (or keeps a new one); whether it is kept."""
    try:
        if create or marker.exists():
            marker.touch()
            return True
    except OSError:
        pass
    return False


def prune(cache):
    limit = time.time() - CACHE_DAYS * 86400
    for entry in cache.iterdir():
        try:
            if entry.stat().st_mtime < limit:
                entry.unlink()
        except OSError:
            pass


def share_of(sources, share):
    """The K-th of N shares of `sources` (K from 1): every N-th source in path order, starting with the K-th."""
    part, _, count = share.partition("/")
    if not (part.isdigit() and count.isdigit() and 1 <= int(part) <= int(count)):
        raise ValueError(f"--share {share}: expected K/N with 1 <= K <= N, such as 2/6")
    return sorted(set(sources))[int(part) - 1 :: int(count)]


def parse_arguments(argv):
    """(share, jobs, build_dir, sources), or None after printing what is wrong."""
    share, jobs = None, len(os.sched_getaffinity(0)) or 1
    while argv and argv[0].startswith("--"):
        option, value = argv[0], argv[1] if len(argv) > 1 else ""
        if option == "--share":
            share = value
        elif option == "--jobs" and value.isdigit() and int(value) >= 1:
            jobs = int(value)
        else:
            sys.stderr.write(f"lint_tidy.py: bad option {option} {value}\n{__doc__}")
            return None
        argv = argv[2:]
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return None
    return share, jobs, argv[0], argv[1:]


def main(argv):
    arguments = parse_arguments(argv)
    if arguments is None:
        return 2
    share, jobs, build_dir, sources = arguments
    whole = f"{len(sources)} files of src/"
    if share:
        try:
            sources = share_of(sources, share)
        except ValueError as error:
            sys.stderr.write(f"lint_tidy.py: {error}\n")
            return 2
        whole = f"{len(sources)} files of share {share} of the {whole}"
    started = time.monotonic()
    cache = cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        keys = input_keys(build_dir, sources)
    except OSError as error:  # no cache: every source is analysed
        print(f"lint: no cache of clean sources ({error})")
        cache, keys = None, dict.fromkeys(sources)
    to_analyse = [source for source in sources if not (keys[source] and remember(cache / keys[source]))]
    skipped = f" (the others were found clean with the same inputs: {cache})" if len(to_analyse) < len(sources) else ""
    print(f"lint: clang-tidy on {len(to_analyse)} of {whole}{skipped}, {jobs} at a time", flush=True)
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for source, (status, findings) in zip(to_analyse, pool.map(lambda s: tidy(build_dir, s), to_analyse)):
            if status == 0:
                if keys[source]:
                    remember(cache / keys[source], create=True)
            else:
                failed += 1
                sys.stdout.write(findings or f"{source}: clang-tidy exited with status {status}\n")
    if cache:
        prune(cache)
    print(f"lint: clang-tidy took {time.monotonic() - started:.0f} s")
    if failed:
        print(f"lint: clang-tidy found problems in {failed} files")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
