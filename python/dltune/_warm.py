"""Warm trial processes for a program's own trials (docs/trial-protocol.md, "Warm trial processes (Python programs)";
docs/python.md, "Warm trials").

Started by the worker with DLTUNE_WARM_SERVER=N, a program that calls dltune.run(train) has done its set-up (imports,
data) when it gets there; run() then serves the worker's requests on the Unix socket N instead of training. For each
request it forks an intermediate process that forks the trial and exits, so the trial is re-parented to the worker
(a child subreaper). In the trial, serve() returns: the process has taken the trial's descriptors, working directory,
environment and command line, and run() goes on as in a cold process. In the server it never returns: the server
exits (without running the rest of the program) when the worker closes the socket, or after answering that it is
stale. The messages are those of dltune's own trial server (src/trial/trial_server.cc).
"""
from __future__ import annotations

import ctypes
import fcntl
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import stat
import struct
import sys
import threading
import time
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping, NoReturn, cast

SERVER_VARIABLE = "DLTUNE_WARM_SERVER"
OFFER_VARIABLE = "DLTUNE_WARM_OFFER"
START_VARIABLE = "DLTUNE_WARM_START"
REPORT_FD = 3
MAX_REQUEST = 1 << 20  # the trial's command line and environment, as JSON
MAX_DESCRIPTORS = 8  # received, as the C++ server does; a request carries three
REPARENT_TIMEOUT = 10.0
PR_SET_PDEATHSIG = 1
SHELLS = {"sh", "bash", "dash"}
OPERATOR_CHARACTERS = ";&|()<>\n"
WORKER_PREFIX = ["trap", ":", "TERM"]  # the worker keeps a compound command's shell alive through SIGTERM with it
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class Unsupported(Exception):
    """The trial's command line is not one a program server can start warm: it starts cold."""


class Stale(Unsupported):
    """This server may not fork the trial, but a fresh one may: its code changed, CUDA started in it, or the trial runs
    another program (answered with "stale": true; the server exits)."""


# --- the trial's command line ------------------------------------------------------------------------------------

class Program:
    """What a Python process runs: a script (its file), a module (-m) or code (-c), and the interpreter words before
    it (the interpreter and its options, as on its command line)."""

    def __init__(self, kind: str | None, interpreter: Iterable[str], path: str | None = None,
                 modules: Iterable[str] = (), argv0: str | None = None, code: str | None = None,
                 executable: str | None = None) -> None:
        self.kind = kind  # "script", "module", "code", or None (standard input)
        self.interpreter = list(interpreter)
        self.path = path  # script: its real path
        self.modules = set(modules)  # module: the names -m may give it
        self.argv0 = argv0  # module: sys.argv[0] as Python sets it, the module's file
        self.code = code
        self.executable = os.path.realpath(executable or sys.executable)

    @classmethod
    def of_this_process(cls) -> Program:
        argv = original_argv()
        interpreter, kind, value, _ = split_python_command(argv)
        main = sys.modules.get("__main__")
        main_file = getattr(main, "__file__", None)
        if kind == "script" and main_file:
            return cls("script", interpreter, path=os.path.realpath(main_file))
        if kind == "module" and main_file:
            spec = getattr(main, "__spec__", None)
            names = {cast(str, value)}  # -m's module name
            if spec is not None and spec.name:
                names.add(spec.name)
                if spec.name.endswith(".__main__"):
                    names.add(spec.name[:-len(".__main__")])
            return cls("module", interpreter, modules=names, argv0=os.path.abspath(main_file))
        if kind == "code":
            return cls("code", interpreter, code=value)
        return cls(None, interpreter)

    def file(self) -> str | None:
        """The file that is the program: its script, or its -m module's file; None for -c code."""
        return self.path if self.kind == "script" else self.argv0 if self.kind == "module" else None

    def describe(self) -> str:
        described: dict[str | None, Callable[[], str | None]] = {
            "script": lambda: self.path, "module": lambda: "-m " + sorted(self.modules)[0], "code": lambda: "-c ..."}
        return str(described.get(self.kind, lambda: "a program read from standard input")())


def original_argv() -> list[str]:
    """The interpreter's own command line: sys.orig_argv (Python 3.10), else /proc/self/cmdline."""
    if hasattr(sys, "orig_argv"):
        return list(sys.orig_argv)
    with open("/proc/self/cmdline", "rb") as cmdline:
        return [os.fsdecode(word) for word in cmdline.read().split(b"\0")[:-1]]


def split_python_command(words: list[str]) -> tuple[list[str], str | None, str | None, list[str]]:
    """A Python command line's parts: (interpreter and options, kind, value, the program's arguments). kind is
    "script" (value: its path as written), "module" (-m NAME), "code" (-c CODE) or None (no program: standard
    input). Options are CPython's: -X and -W take a value, -c and -m end them, flags may be combined (-uB)."""
    i = 1
    while i < len(words):
        word = words[i]
        if word == "--":
            i += 1
            break
        if word == "-" or not word.startswith("-"):
            break
        if word.startswith("--"):
            i += 2 if word == "--check-hash-based-pycs" else 1
            continue
        letters = word[1:]
        ends = [letters.index(letter) for letter in "cm" if letter in letters]
        valued = [letters.index(letter) for letter in "WX" if letter in letters]
        if ends and (not valued or min(ends) < min(valued)):
            at = min(ends)
            interpreter = list(words[:i]) + (["-" + letters[:at]] if at else [])
            kind = "code" if letters[at] == "c" else "module"
            attached = letters[at + 1:]
            if attached:
                return interpreter, kind, attached, list(words[i + 1:])
            if i + 1 >= len(words):
                return interpreter, None, None, []
            return interpreter, kind, words[i + 1], list(words[i + 2:])
        if valued:
            i += 1 if min(valued) + 1 < len(letters) else 2  # -Xdev, or -X dev
        else:
            i += 1
    if i >= len(words) or words[i] == "-":
        return list(words[:i]), None, None, list(words[i + 1:])
    return list(words[:i]), "script", words[i], list(words[i + 1:])


def trial_command(argv: list[str], cwd: str, program: Program,
                  path: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The trial's sys.argv and the variables its command line assigns, from a request's argv: the worker's
    ["/bin/sh", "-c", COMMAND] or a program's argv. The command is one program: `[exec] [NAME=value ...] [env
    NAME=value ...] INTERPRETER [OPTIONS] PROGRAM [ARGS...]` (the worker's `trap : TERM;` before it is allowed), with
    INTERPRETER and OPTIONS those of this server and PROGRAM its own script, -m module or -c code; or the script
    alone (started by its #! line). sys.argv is what Python gives a cold process: the script as written (the
    module's file for -m, "-c" for code) and the arguments after it. Raises Unsupported (Stale when PROGRAM is
    another program)."""
    if len(argv) == 3 and os.path.basename(argv[0]) in SHELLS and argv[1] == "-c":
        words = simple_command(argv[2])
    else:
        words = list(argv)
    if words[:1] == ["exec"]:
        words = words[1:]
    assignments, words = _assignments(words)
    if words[:1] == ["env"]:
        more, words = _assignments(words[1:])
        if words and words[0].startswith("-"):
            raise Unsupported(f"its command runs `env {words[0]}`: only env NAME=value ... starts warm")
        assignments.update(more)
    if not words:
        raise Unsupported("its command line names no program")
    where = cwd or os.getcwd()
    if program.kind == "script" and _same_file(where, words[0], program.path):
        return words, assignments  # the script itself, started by its #! line
    interpreter, kind, value, rest = split_python_command(words)
    if not _same_interpreter(interpreter, program, where, path):
        raise Unsupported(f"its command runs {shlex.join(interpreter)}, not this server's interpreter "
                          f"{shlex.join(program.interpreter)}")
    if kind == "script" and program.kind == "script" and _same_file(where, value, program.path):
        return [cast(str, value), *rest], assignments  # a script's path, which _same_file found
    if kind == "module" and program.kind == "module" and value in program.modules:
        return [cast(str, program.argv0), *rest], assignments  # a module's Program has its argv0
    if kind == "code" and program.kind == "code" and value == program.code:
        return ["-c", *rest], assignments
    described: dict[str | None, Callable[[], str | None]] = {
        "script": lambda: value, "module": lambda: f"-m {value}", "code": lambda: "-c ..."}
    runs = described.get(kind, lambda: "a program read from standard input")()
    raise Stale(f"the trial runs {runs}, not this server's program {program.describe()}")


def simple_command(command: str) -> list[str]:
    """The words of a shell command that is one simple command (after the worker's `trap : TERM;`); Unsupported
    for anything a program server cannot do as the shell would: lists, pipes, redirections, expansions."""
    if any(character in command for character in "$`"):
        raise Unsupported("its command line has shell expansions ($ or `)")
    lexer = shlex.shlex(command, posix=True, punctuation_chars=OPERATOR_CHARACTERS)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError as error:
        raise Unsupported(f"its command line cannot be read: {error}") from error
    segments: list[list[str]] = [[]]
    separators: list[str] = []
    for token in tokens:
        if token and all(character in OPERATOR_CHARACTERS for character in token):
            separators.append(token)
            segments.append([])
        else:
            segments[-1].append(token)
    if len(segments) > 1 and segments[0] == WORKER_PREFIX and separators[0] == ";":
        segments, separators = segments[1:], separators[1:]
    # A trailing ";" or newline ends the command; anything else is a second command, a pipe or a redirection.
    while len(segments) > 1 and not segments[-1] and separators[-1] in (";", "\n"):
        segments, separators = segments[:-1], separators[:-1]
    if len(segments) != 1 or not segments[0]:
        raise Unsupported("its command line is not one program (a list, a pipe or a redirection)")
    words = segments[0]
    if any(word.startswith(("~", "#")) for word in words):
        raise Unsupported("its command line has a shell expansion (~) or a comment")
    return words


def _assignments(words: list[str]) -> tuple[dict[str, str], list[str]]:
    assigned: dict[str, str] = {}
    while words and ASSIGNMENT.match(words[0]):
        name, _, value = words[0].partition("=")
        assigned[name] = value
        words = words[1:]
    return assigned, list(words)


def _same_file(cwd: str, word: str | None, real_path: str | None) -> bool:
    if not word:
        return False
    return os.path.realpath(os.path.join(cwd, word)) == real_path


def _same_interpreter(words: list[str], program: Program, cwd: str, path: str | None) -> bool:
    if words == program.interpreter:
        return True
    if not words or words[1:] != program.interpreter[1:]:
        return False
    found = os.path.join(cwd, words[0]) if os.sep in words[0] else shutil.which(words[0], path=path)
    return found is not None and os.path.realpath(found) == program.executable


# --- whether this process may serve or offer --------------------------------------------------------------------

def cold_only_reason(made_before: bool, reuse_process: bool = False) -> str | None:
    """Why trials of this process's program must start cold, or None: checked after the set-up, before the offer.
    `reuse_process`: its trials run in the server's own process, where CUDA and threads may have started."""
    if made_before:
        return ("its set-up made the trial (dltune.trial()) before dltune.run: the set-up must not depend on the "
                "trial (read its params in train)")
    if not reuse_process and _cuda_started(sys.modules):
        return ("its set-up started CUDA: move what uses the GPU into train, or keep the process for every trial "
                "(dltune.run(train, reuse_process=True))")
    if not reuse_process and threading.active_count() > 1:
        names = ", ".join(thread.name for thread in threading.enumerate() if thread is not threading.main_thread())
        return f"its set-up started threads ({names}): a forked trial would have none of them"
    program = Program.of_this_process()
    if program.kind is None:
        return "it reads its program from standard input"
    command = _parent_shell_command()
    if command is not None:
        try:
            trial_command(["/bin/sh", "-c", command], os.getcwd(), program, os.environ.get("PATH"))
        except Unsupported as error:
            return str(error)
    return None


def _parent_shell_command() -> str | None:
    """The command of the `sh -c COMMAND` this process was started by, when its shell is still its parent."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
            words = [os.fsdecode(word) for word in cmdline.read().split(b"\0")[:-1]]
    except OSError:
        return None
    if len(words) == 3 and os.path.basename(words[0]) in SHELLS and words[1] == "-c":
        return words[2]
    return None


def _cuda_started(modules: Mapping[str, ModuleType]) -> bool:
    torch = modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    try:
        return bool(cuda is not None and cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a torch without CUDA support answers in its own ways
        return False


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


class Snapshot:
    """The files of the modules this process imported (its program's included), as they were when it began to
    serve; and when the process started, for its main file, which it read first of all."""

    def __init__(self, modules: Mapping[str, ModuleType] | None = None, main_file: str | None = None) -> None:
        modules = sys.modules if modules is None else modules
        self.files: dict[str, tuple[int, int]] = {}
        for module in list(modules.values()):
            path = getattr(module, "__file__", None)
            if not isinstance(path, str) or path in self.files:
                continue
            try:
                status = os.stat(path)
            except OSError:
                continue
            self.files[path] = (status.st_mtime_ns, status.st_size)
        main = modules.get("__main__")
        self.main_file = main_file if main_file is not None else getattr(main, "__file__", None)
        self.started_ns = _latest_start_ns()

    def stale_reason(self, modules: Mapping[str, ModuleType] | None = None, cuda_allowed: bool = False) -> str | None:
        """Why this server may no longer start trials, or None: a file changed (its code is not the program's any
        more), or CUDA started in it (unless `cuda_allowed`: a server that runs its trials in its own process)."""
        for path, recorded in self.files.items():
            try:
                status = os.stat(path)
            except FileNotFoundError:
                return f"{path} was removed since the program server started"
            except OSError:
                continue
            if (status.st_mtime_ns, status.st_size) != recorded:
                return f"{path} changed since the program server started"
        if self.main_file and self.started_ns and self.files.get(self.main_file, (0,))[0] >= self.started_ns:
            return f"{self.main_file} changed after the program server started (during its set-up)"
        if not cuda_allowed and _cuda_started(sys.modules if modules is None else modules):
            return ("CUDA was started in the program server (torch.cuda.is_initialized()): a forked trial could "
                    "not use it; start CUDA in train, not in the set-up")
        return None


def _latest_start_ns() -> int | None:
    """The latest time this process may have started, in ns since the epoch (/proc/self/stat counts in clock ticks
    since boot); None where unknown."""
    try:
        with open("/proc/self/stat", "rb") as stat_file:
            fields = stat_file.read().rsplit(b")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        since_boot = int(fields[19]) / ticks  # field 22, starttime
        started = time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot)
        return int((started + 1 / ticks + 0.001) * 1e9)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _python_settings(entries: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in entries.items() if name.startswith("PYTHON")}


def _start_environment() -> dict[str, str]:
    """The environment this process was started with (what the interpreter read as it started)."""
    try:
        with open("/proc/self/environ", "rb") as environ:
            entries = [os.fsdecode(entry) for entry in environ.read().split(b"\0") if entry]
    except OSError:
        return dict(os.environ)
    return environment_of(entries)


def environment_of(entries: Iterable[str]) -> dict[str, str]:
    environment: dict[str, str] = {}
    for entry in entries:
        name, found, value = entry.partition("=")
        if found and name:
            environment[name] = value
    return environment


# --- the server --------------------------------------------------------------------------------------------------

class _Trial:
    """A request made ready before the fork: nothing in the forked trial may fail but the system calls."""

    def __init__(self, argv: list[str], environment: dict[str, str], cwd: str, parent: int) -> None:
        self.argv = argv
        self.environment = environment
        self.cwd = cwd
        self.parent = parent


class Server:
    def __init__(self, fd: int, refusal: str | None = None) -> None:
        if fd < REPORT_FD:
            raise ValueError(f"{SERVER_VARIABLE}={fd}: the socket's descriptor is 3 or more")
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise ValueError(f"{SERVER_VARIABLE}={fd}: descriptor {fd} is not a socket (a launcher between dltune "
                             f"and the program closed it?)")
        self.fd = fd
        self.socket = socket.socket(fileno=fd)
        self.pid = os.getpid()
        self.refusal = refusal
        try:
            self.output = os.readlink("/proc/self/fd/1")
        except OSError:
            self.output = "unknown"
        self.program = Program.of_this_process()
        self.snapshot = Snapshot()
        self.python_settings = _python_settings(_start_environment())
        self.signals: dict[int, Any] = {}
        for number in signal.valid_signals():
            try:
                self.signals[number] = signal.getsignal(number)
            except (OSError, ValueError):
                pass
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        self.libc = ctypes.CDLL(None, use_errno=True)

    def receive(self) -> tuple[dict[str, Any] | None, list[int]] | None:
        """The worker's next request (None when it is not a JSON object) and its descriptors; None at the socket's end
        or on a message longer than a request may be. `prepare` messages, which dltune's own server prepares ahead
        with, are skipped: a program has done its set-up."""
        while True:
            try:
                text, fds, flags, _ = socket.recv_fds(self.socket, MAX_REQUEST, MAX_DESCRIPTORS,
                                                      socket.MSG_CMSG_CLOEXEC)
            except OSError:
                return None
            if not text or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                _close(fds)
                return None
            request = _json_object(text)
            if request is not None and isinstance(request.get("prepare"), dict):
                _close(fds)
                continue
            return request, fds

    def reply(self, answer: dict[str, Any], fds: list[int]) -> bool:
        """Sends `answer` (saying why on stderr when it is an error, the request's descriptors then closed); False
        when the worker is gone."""
        if "error" in answer:
            _close(fds)
            print(f"dltune: program server {self.pid}: no warm trial: {answer['error']}", file=sys.stderr, flush=True)
        try:
            self.socket.send(json.dumps(answer).encode(), socket.MSG_NOSIGNAL)
        except OSError:
            return False
        return True

    def serve(self) -> list[str]:
        """Serves until the worker closes the socket (then exits the process); returns in each forked trial."""
        while (received := self.receive()) is not None:
            request, fds = received
            stale = False
            try:
                trial = self._read(request, fds)
                reason = self.snapshot.stale_reason()
                if reason is not None:
                    raise Stale(reason)
                if self.refusal:
                    raise Unsupported(self.refusal)
                threads = _thread_count()
                if threads > 1:
                    raise Unsupported(f"{threads - 1} threads besides the main one run in the program server (a "
                                      f"thread pool its set-up started): a forked trial could hang on their locks")
                trial = self._ready(trial)
                pid = self._fork(trial, fds)
                if pid is None:
                    return trial.argv  # in the trial
                reply: dict[str, Any] = {"pid": pid}
            except Stale as error:
                reply, stale = {"error": str(error), "stale": True}, True
            except Exception as error:  # noqa: BLE001 - any failure is this request's answer, as in C++
                reply = {"error": str(error) or type(error).__name__}
            _close(fds)
            if not self.reply(reply, []) or stale:
                break
        self._exit()

    def _exit(self) -> NoReturn:
        flush_streams()
        os._exit(0)  # the rest of the program is the trials'

    @staticmethod
    def _read(request: dict[str, Any] | None, fds: list[int]) -> _Trial:
        if request is None:
            raise ValueError("a request is a JSON object")
        try:
            argv, entries, cwd, parent = request["argv"], request["env"], request["cwd"], request["parent"]
        except KeyError as error:
            raise ValueError(f"a request names argv, env, cwd and parent; this one has no {error}") from None
        if not (isinstance(argv, list) and argv and all(isinstance(word, str) for word in argv)):
            raise ValueError("a request's argv is a list of words")
        if not (isinstance(entries, list) and all(isinstance(entry, str) for entry in entries)):
            raise ValueError("a request's env is a list of NAME=value")
        if not isinstance(cwd, str) or isinstance(parent, bool) or not isinstance(parent, int):
            raise ValueError("a request's cwd is text and its parent a pid")
        if len(fds) != 3:
            raise ValueError("a request carries three descriptors")
        return _Trial(argv, environment_of(entries), cwd, parent)

    def _ready(self, trial: _Trial) -> _Trial:
        argv, assignments = trial_command(trial.argv, trial.cwd, self.program, trial.environment.get("PATH"))
        environment = dict(trial.environment)
        environment.update(assignments)
        settings = _python_settings(environment)
        for name in sorted(set(settings) | set(self.python_settings)):
            if settings.get(name) != self.python_settings.get(name):
                raise Unsupported(f"the trial's {name} ({settings.get(name)!r}) is not the program server's "
                                  f"({self.python_settings.get(name)!r}): Python reads it as it starts")
        environment[START_VARIABLE] = str(self.pid)
        return _Trial(argv, environment, trial.cwd, trial.parent)

    def _fork(self, trial: _Trial, fds: list[int]) -> int | None:
        """Forks the trial through an intermediate process and returns its pid; None in the trial itself."""
        flush_streams()
        generator = random.getstate()  # Python reseeds `random` in a forked child: the trial gets it back
        read_end, write_end = os.pipe()
        try:
            intermediate = os.fork()
        except OSError as error:
            os.close(read_end)
            os.close(write_end)
            raise RuntimeError(f"cannot fork a trial process: {error}") from None
        if intermediate == 0:
            self._intermediate(read_end, write_end, trial, fds, generator)
            return None  # in the trial
        os.close(write_end)
        pid = grandchild_pid(read_end, intermediate)
        if pid <= 0:
            raise RuntimeError("cannot fork a trial process")
        return pid

    def _intermediate(self, read_end: int, write_end: int, trial: _Trial, fds: list[int], generator: Any) -> None:
        """Forks the trial and exits at once, so that the trial is re-parented to the worker, its subreaper."""
        try:
            os.close(read_end)
            try:
                pid = os.fork()
            except OSError:
                pid = -1
            if pid == 0:
                os.close(write_end)
                self._become(trial, fds, generator)
                return
            if pid > 0:
                try:
                    os.setpgid(pid, pid)  # as the trial does itself: whichever runs first
                except OSError:
                    pass
            os.write(write_end, struct.pack("q", pid))
        except BaseException:  # noqa: BLE001 - nothing may escape into the program from here
            pass
        os._exit(0)

    def _become(self, trial: _Trial, fds: list[int], generator: Any) -> None:
        """In the forked trial: waits to be the worker's child, then takes on the trial's descriptors, directory,
        environment, command line and the process state a cold process has. Exits (127) when it cannot become the
        trial it was asked to be."""
        try:
            try:
                os.setpgid(0, 0)
            except OSError:
                pass
            if not _wait_to_become_child_of(trial.parent, REPARENT_TIMEOUT):
                os._exit(127)
            self.libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0), ctypes.c_ulong(0),
                            ctypes.c_ulong(0))
            if os.getppid() != trial.parent:
                os._exit(127)  # not the worker's child (or the worker died meanwhile)
            self._take_descriptors(fds)
            if trial.cwd:
                try:
                    os.chdir(trial.cwd)
                except OSError:
                    os.write(2, b"dltune: cannot enter the trial's working directory\n")
                    os._exit(126)
            os.environ.clear()
            os.environ.update(trial.environment)
            sys.argv[:] = trial.argv
            restore_signals(self.signals, self.mask)
            random.setstate(generator)
            _set_threads(trial.environment)
            print(f"started warm: forked by program server {self.pid} (its set-up's output: {self.output})",
                  flush=True)
        except BaseException:  # noqa: BLE001 - a half-made trial never runs
            os._exit(127)

    def _take_descriptors(self, fds: list[int]) -> None:
        # Above 3 first: a received descriptor may have a number the others are about to take.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds]
        self.socket.detach()  # its number may be the report's now: never closed by the socket object
        for fd in fds:
            if fd not in (0, 1, 2, self.fd):
                os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(high[0], 1)
        os.dup2(high[1], 2)
        if self.fd != REPORT_FD:
            os.close(self.fd)
        os.dup2(high[2], REPORT_FD)  # also closes the server's socket when it sits on that number
        for fd in high:
            os.close(fd)
        if null > REPORT_FD:
            os.close(null)


def grandchild_pid(read_end: int, intermediate: int) -> int:
    """The pid the intermediate process wrote to `read_end` (closed here) before it exited, once it is reaped; -1
    when it wrote none (its fork failed)."""
    data = b""
    try:
        while len(data) < 8:
            chunk = os.read(read_end, 8 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(read_end)
    try:
        os.waitpid(intermediate, 0)  # PEP 475: an interrupted wait goes on
    except ChildProcessError:
        pass
    return int(struct.unpack("q", data)[0]) if len(data) == 8 else -1


def flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


def restore_signals(signals: Mapping[int, Any], mask: Iterable[int]) -> None:
    """Puts back the signal mask and handlers a server had when the program called run."""
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for number, handler in signals.items():
        if handler is not None and signal.getsignal(number) != handler:
            try:
                signal.signal(number, handler)
            except (OSError, ValueError, TypeError):
                pass


def _set_threads(environment: Mapping[str, str]) -> None:
    """A cold process's torch takes its thread count from OMP_NUM_THREADS as it loads (dltune sets it to
    DLTUNE_THREADS, unless the command line assigns it); the server's has 1."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "set_num_threads"):
        return
    count = environment.get("OMP_NUM_THREADS") or environment.get("DLTUNE_THREADS") or ""
    threads = int(count) if count.isdigit() and int(count) > 0 else len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)


def _wait_to_become_child_of(worker: int, timeout: float) -> bool:
    """The intermediate process exits at once; until then it is this process's parent. Re-parented anywhere but to
    the worker, or with the worker gone, the worker died meanwhile."""
    intermediate = os.getppid()
    deadline = time.monotonic() + timeout
    while True:
        parent = os.getppid()
        if parent == worker:
            return True
        if parent != intermediate or time.monotonic() >= deadline:
            return False
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        time.sleep(0.0001)


def _json_object(text: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _close(fds: Iterable[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def serving() -> bool:
    return bool(os.environ.get(SERVER_VARIABLE))


def serve(refusal: str | None = None) -> list[str]:
    """Serves the worker's requests on the socket DLTUNE_WARM_SERVER names. Returns in each forked trial (its
    sys.argv); the server exits when the worker leaves. `refusal`: why no trial may be forked (answered to each)."""
    variable = os.environ.get(SERVER_VARIABLE, "")
    try:
        server = Server(int(variable), refusal)
    except (ValueError, OSError) as error:
        print(f"dltune: cannot serve warm trials: {error}", file=sys.stderr, flush=True)
        os._exit(2)
    return server.serve()
