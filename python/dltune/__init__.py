"""dltune's trial client: a Python training program tuned by dltune in a few lines (docs/python.md).

    import dltune, dltune.torch
    trial = dltune.trial()
    start = dltune.torch.restore(trial, model, optimizer)
    for step in range(start + 1, trial.max_train_steps + 1):
        ...
        trial.report(step, loss=loss)
        if trial.evaluates_at(step):
            trial.record_evaluation(step, "valid", error_rate=error_rate)
            dltune.torch.save(trial, step, model, optimizer)
        if trial.should_stop():
            trial.stop(step)

Or, for trials that start warm (forked from a process that has done the set-up once, docs/python.md "Warm trials"):

    # set-up: imports, data; nothing that depends on the trial
    def train(trial):
        ...
    dltune.run(train, max_train_steps=1000)

Standard library only; `dltune.torch`, `dltune.lightning` and `dltune.huggingface` import their frameworks when
imported themselves. Typed (py.typed): mypy and other checkers read the client's annotations.
"""
from __future__ import annotations

import atexit
import os
import sys
import traceback
from typing import Any, Callable, Mapping, NoReturn, TypeVar

from ._channel import Scalar
from ._study import Study
from ._trial import EXIT_STOPPED, Evaluation, Trial

__version__ = "0.1.0"  # dltune's version (CMakeLists.txt project())
PROTOCOL = 1

_current: Trial | None = None
_Result = TypeVar("_Result")

if os.environ.get("DLTUNE_WARM_SERVER"):
    # In a program server, torch.cuda.is_available() asks NVML and leaves CUDA unstarted, so its forked trials can
    # start it (the trials' environment is their own, without this).
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def trial(defaults: Mapping[str, Any] | None = None, max_train_steps: int | None = None, *,
          argv: list[str] | None = None, stop_check_every: int = 10, flush_seconds: float = 1.0) -> Trial:
    """The trial this process runs, made once (later calls return the same one).

    Under dltune everything comes from the DLTUNE_* environment. Standalone, the params are `--params FILE_OR_JSON`
    (taken out of `argv`, sys.argv by default), else the file in DLTUNE_PARAMS, over `defaults`; the step budget is
    `max_train_steps`; reports go to standard output and checkpoints to ./dltune-trial (or DLTUNE_TRIAL_DIR).
    stop_check_every: calls of should_stop between the ranks' agreements; flush_seconds: how often reported steps
    are written.
    """
    global _current
    if _current is None and os.environ.get("DLTUNE_WARM_SERVER"):
        # Started as its trials' server, but making a trial outside dltune.run: it serves none, and runs none.
        print("dltune: this program serves no warm trials: it makes its trial (dltune.trial()) outside dltune.run; "
              "its trials start cold", file=sys.stderr, flush=True)
        os._exit(3)
    if _current is None:
        _current = Trial(defaults=defaults, max_train_steps=max_train_steps, argv=argv,
                         stop_check_every=stop_check_every, flush_seconds=flush_seconds)
    return _current


def run(train: Callable[[Trial], _Result], *, reuse_process: bool = False, **trial_options: Any) -> _Result:
    """Runs one trial: `train(trial)` with the trial dltune.trial(**trial_options) makes.

    Everything the program does before calling it is its set-up, which must not depend on the trial (read the
    params in `train`). Under dltune its trials may then start warm: the worker starts the program once more as a
    server (DLTUNE_WARM_SERVER), which does the set-up and forks each trial from there (docs/python.md, "Warm
    trials"). Under dltune the process ends with its trial: `run` does not return, and exits as the trial ended (0,
    75 when stopped, 1 with the traceback of an exception) once the exit handlers (atexit) have run and the output
    is flushed, without the interpreter's teardown of every module it loaded, which takes a third of a second with
    torch. Standalone it runs one trial and returns its result.

    reuse_process=True: the server runs its trials in its own process, one after the other, instead of forking each
    (docs/python.md, "Reusing the process"): what the set-up and earlier trials leave in the process stays (a CUDA
    context, data on the GPU), and a crash, a leak or an out-of-memory error of one trial is its server's, ending the
    trial it runs and costing the next one a new server's set-up.
    """
    global _current
    if os.environ.get("DLTUNE_WARM_SERVER"):
        from . import _warm

        refusal = _warm.cold_only_reason(_current is not None, reuse_process)
        if reuse_process:
            from . import _reuse

            _reuse.serve_in_process(lambda: _trial_in_process(train, trial_options), refusal)  # never returns
        _warm.serve(refusal=refusal)  # returns in a forked trial only
        _current = None  # the trial's own, from its own environment
    made_before = _current is not None
    current = trial(**trial_options)
    if os.environ.get("DLTUNE_WARM_OFFER") == "1" and current.world_size == 1 and not _launched():
        from . import _warm

        reason = _warm.cold_only_reason(made_before, reuse_process)
        if reason is None:
            current._offer_warm(_warm.Program.of_this_process().file(), reuse_process)
        else:
            print(f"dltune: trials of this program start cold: {reason}", file=sys.stderr)
    if not current.managed:
        return train(current)
    _end_process(_exit_status_of(train, current))


def _trial_in_process(train: Callable[[Trial], object], trial_options: Mapping[str, Any]) -> int:
    """Runs one trial in a program server's own process (reuse_process); its exit status, as run() would exit."""
    global _current
    _current = None  # the trial's own, from its environment
    current = trial(**trial_options)
    status = _exit_status_of(train, current)
    current._end_in_process()
    _current = None
    return status


def _exit_status_of(train: Callable[[Trial], object], current: Trial) -> int:
    """Runs train(current); the exit status a process ending with it would have."""
    try:
        train(current)
        return 0
    except SystemExit as ended:
        return _exit_status(ended.code)
    except BaseException:  # noqa: B902 - as the interpreter does with an exception nobody caught
        traceback.print_exc()
        return 1


def _exit_status(code: object) -> int:
    """The exit status SystemExit(code) gives, as the interpreter computes it (printing a message it carries)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _end_process(status: int) -> NoReturn:
    """Ends the process as the interpreter would at its end, less the teardown of its modules: the exit handlers
    (the trial's own last report lines among them), then the output streams, then the exit."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def _launched() -> bool:
    """Whether a launcher (torchrun) started this process: a server started the same way would not be reached."""
    return any(name in os.environ for name in ("TORCHELASTIC_RUN_ID", "RANK", "LOCAL_RANK"))


def study(name: str, storage: str | None = None, executable: str | None = None) -> Study:
    """A study of a store, for reading its trials and measurements as dicts."""
    return Study(name, storage=storage, executable=executable)


__all__ = ["trial", "run", "study", "Trial", "Study", "Evaluation", "Scalar", "EXIT_STOPPED", "PROTOCOL"]
