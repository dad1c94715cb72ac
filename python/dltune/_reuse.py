"""Trials run in the program server's own process, one after the other (dltune.run(train, reuse_process=True);
docs/python.md, "Reusing the process"; docs/trial-protocol.md, "Warm trial processes (Python programs)").

The server is started once per worker slot, like a forking one, and answers the same requests, but it runs each trial
itself: what its set-up and earlier trials left in the process (a CUDA context, data on the GPU, compiled kernels)
stays. For each request it forks a stand-in through an intermediate process, as a forking server forks a trial, so the
worker has a process to wait for, signal and kill:
  - the stand-in is the worker's child, in a process group of its own; it forwards SIGTERM and SIGINT to the server,
    and exits with the trial's exit status once the server sends it;
  - a stand-in that dies first (killed by the worker: a timeout, the worker's end) takes the server with it, as a kill
    takes a trial's own process; a server that dies first (a crash in the trial) makes its stand-in exit 1, saying so.
Between trials the server puts back its descriptors, working directory, environment, command line, signal handlers and
random generators as they were after the set-up, so a trial starts from the state a cold process would have there.
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import random
import signal
import struct
import sys
import threading
from typing import Any, Callable

from . import _warm

STAND_IN_SIGNALS = (signal.SIGTERM, signal.SIGINT)
CUDA_DEFAULT_SEED = 67280421310721  # torch's default_rng_seed_val: a CUDA generator's seed before any manual_seed


class _Generators:
    """The process's random generators as the set-up left them: Python's, NumPy's global one and torch's, put back
    before each trial (a cold process starts every trial from them)."""

    def __init__(self) -> None:
        self.python = random.getstate()
        numpy = sys.modules.get("numpy")
        self.numpy = numpy.random.get_state() if numpy is not None else None
        torch = sys.modules.get("torch")
        self.torch = torch.random.get_rng_state() if torch is not None else None
        self.cuda = torch.cuda.get_rng_state_all() if torch is not None and _warm._cuda_started(sys.modules) else None

    def restore(self) -> None:
        random.setstate(self.python)
        numpy = sys.modules.get("numpy")
        if numpy is not None and self.numpy is not None:
            numpy.random.set_state(self.numpy)
        torch = sys.modules.get("torch")
        if torch is None:
            return
        if self.torch is not None:
            torch.random.set_rng_state(self.torch)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)
        elif _warm._cuda_started(sys.modules):
            torch.cuda.manual_seed_all(CUDA_DEFAULT_SEED)  # started by an earlier trial: as it was before it


class _ProcessState:
    """What a trial changes in the process and the next one must not see: descriptors 0-2, the working directory,
    the environment, the command line, the signal handlers and mask."""

    def __init__(self, server: _warm.Server) -> None:
        # Above the report channel's 3, which each trial takes.
        self.descriptors = [_dup_high(fd) for fd in (0, 1, 2)]
        self.cwd = os.getcwd()
        self.environment = dict(os.environ)
        self.argv = list(sys.argv)
        self.signals = server.signals
        self.mask = server.mask

    def restore(self) -> None:
        _warm.flush_streams()
        for target, saved in enumerate(self.descriptors):
            os.dup2(saved, target)
        try:
            os.close(_warm.REPORT_FD)  # the worker reads the trial's end from its report channel's end of file
        except OSError:
            pass
        os.chdir(self.cwd)
        os.environ.clear()
        os.environ.update(self.environment)
        sys.argv[:] = self.argv
        _warm.restore_signals(self.signals, self.mask)


class InProcessServer(_warm.Server):
    """A program server that runs its trials in its own process (the module's docstring)."""

    def __init__(self, fd: int, refusal: str | None = None) -> None:
        high = _dup_high(fd)
        os.close(fd)  # descriptor 3 is each trial's report channel
        super().__init__(high, refusal)
        self.state = _ProcessState(self)
        self.generators = _Generators()
        self.trials = 0

    def serve_in_process(self, run_trial: Callable[[], int]) -> None:
        """Serves until the worker closes the socket (then exits the process), running each trial with run_trial,
        which returns its exit status."""
        while (received := self.receive()) is not None:
            request, fds = received
            stale = False
            stand_in = None
            try:
                trial = self._read(request, fds)
                if not (request is not None and request.get("reuse") is True):
                    raise _warm.Unsupported("this program reuses its process for its trials "
                                            "(dltune.run(..., reuse_process=True)), and this worker forks them")
                reason = self.snapshot.stale_reason(cuda_allowed=True)
                if reason is not None:
                    raise _warm.Stale(reason)
                if self.refusal:
                    raise _warm.Unsupported(self.refusal)
                trial = self._ready(trial)
                stand_in = self._start_stand_in(trial, fds)
                reply: dict[str, Any] = {"pid": stand_in[0]}
            except _warm.Stale as error:
                reply, stale = {"error": str(error), "stale": True}, True
            except Exception as error:  # noqa: BLE001 - any failure is this request's answer
                reply = {"error": str(error) or type(error).__name__}
            if not self.reply(reply, fds) or stale:
                break
            if stand_in is not None:
                self._run(trial, fds, run_trial, *stand_in)
        self._exit()

    def _start_stand_in(self, trial: _warm._Trial, fds: list[int]) -> tuple[int, int, int]:
        """Forks the trial's stand-in through an intermediate process; (its pid, the write end of its status pipe,
        the read end of its life pipe)."""
        status_read, status_write = os.pipe()
        life_read, life_write = os.pipe()
        pid_read, pid_write = os.pipe()
        _warm.flush_streams()
        intermediate = os.fork()
        if intermediate == 0:
            try:
                os.close(pid_read)
                pid = os.fork()
                if pid == 0:
                    os.close(pid_write)
                    _stand_in(self, trial, fds, status_read, (status_write, life_read), life_write)
                if pid > 0:
                    try:
                        os.setpgid(pid, pid)
                    except OSError:
                        pass
                os.write(pid_write, struct.pack("q", pid))
            except BaseException:  # noqa: BLE001 - nothing may escape into the program from here
                pass
            os._exit(0)
        os.close(pid_write)
        os.close(status_read)
        os.close(life_write)
        pid = _warm.grandchild_pid(pid_read, intermediate)
        if pid <= 0:
            os.close(status_write)
            os.close(life_read)
            raise RuntimeError("cannot fork the trial's stand-in process")
        return pid, status_write, life_read

    def _run(self, trial: _warm._Trial, fds: list[int], run_trial: Callable[[], int], stand_in: int,
             status_write: int, life_read: int) -> None:
        """Runs the trial in this process as the stand-in's, then tells the stand-in how it ended."""
        ended = threading.Event()
        watcher = threading.Thread(target=_watch_stand_in, args=(life_read, ended), name="dltune-stand-in",
                                   daemon=True)
        watcher.start()
        self.trials += 1
        self._take_trial_descriptors(fds)
        status = 1
        try:
            if trial.cwd:
                os.chdir(trial.cwd)
            os.environ.clear()
            os.environ.update(trial.environment)
            sys.argv[:] = trial.argv
            self.generators.restore()
            _warm._set_threads(trial.environment)
            print(f"started warm: in program server {self.pid}'s own process, its trial {self.trials} "
                  f"(reuse_process; its set-up's output: {self.output})", flush=True)
            status = run_trial()
        except BaseException:  # noqa: BLE001 - the trial's failure is its exit status; the server goes on
            import traceback

            traceback.print_exc()
            status = 1
        finally:
            self.state.restore()
        ended.set()
        try:
            os.write(status_write, bytes([status & 0xFF]))
        except OSError:
            pass
        os.close(status_write)
        watcher.join()

    @staticmethod
    def _take_trial_descriptors(fds: list[int]) -> None:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        os.dup2(fds[2], _warm.REPORT_FD)
        _warm._close(fd for fd in fds if fd not in (0, 1, 2, _warm.REPORT_FD))


def _stand_in(server: InProcessServer, trial: _warm._Trial, fds: list[int], status_read: int,
              server_ends: tuple[int, int], life_write: int) -> None:
    """The stand-in: the worker's child for as long as the trial runs in the server (never returns)."""
    try:
        for fd in (*server_ends, server.fd):
            os.close(fd)
        err = os.dup(fds[1])  # the trial's standard error, for the one message it may write
        _warm._close(fds)
        os.setpgid(0, 0)
        if not _warm._wait_to_become_child_of(trial.parent, _warm.REPARENT_TIMEOUT):
            os._exit(127)
        server.libc.prctl(_warm.PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0),
                          ctypes.c_ulong(0), ctypes.c_ulong(0))
        if os.getppid() != trial.parent:
            os._exit(127)
        for number in STAND_IN_SIGNALS:
            signal.signal(number, lambda signum, _frame: os.kill(server.pid, signum))
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        # life_write stays open until this process ends: its end tells the server that the trial was killed.
        status = os.read(status_read, 1)  # a signal's handler runs, and the read goes on (PEP 475)
        if status:
            os._exit(status[0])
        os.write(err, f"dltune: program server {server.pid}, which ran this trial in its own process "
                      f"(reuse_process), died during it\n".encode())
        os._exit(1)
    except BaseException:  # noqa: BLE001 - a stand-in never runs the program
        os._exit(127)


def _watch_stand_in(life_read: int, ended: threading.Event) -> None:
    """In the server while a trial runs: the stand-in's end before the trial's is the worker killing the trial."""
    try:
        while os.read(life_read, 1):
            pass
    except OSError:
        pass
    os.close(life_read)
    if not ended.is_set():
        os._exit(137)  # killed with its stand-in, as a trial's own process would be


def _dup_high(fd: int) -> int:
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)


def serve_in_process(run_trial: Callable[[], int], refusal: str | None = None) -> None:
    """Serves the worker's requests on the socket DLTUNE_WARM_SERVER names, running each trial in this process with
    run_trial (which returns its exit status); exits when the worker leaves."""
    variable = os.environ.get(_warm.SERVER_VARIABLE, "")
    try:
        server = InProcessServer(int(variable), refusal)
    except (ValueError, OSError) as error:
        print(f"dltune: cannot serve trials in its process: {error}", file=sys.stderr, flush=True)
        os._exit(2)
    server.serve_in_process(run_trial)
