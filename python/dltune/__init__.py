"""dltune's trial client: a Python training program tuned by dltune in a few lines (docs/python.md).

    import dltune, dltune.torch
    trial = dltune.trial()
    start = dltune.torch.restore(trial, model, optimizer)
    for step in range(start + 1, trial.max_train_steps + 1):
        ...
        trial.report(step, loss=loss)
        if trial.evaluates_at(step):
            trial.evaluate(step, "valid", error_rate=error_rate)
            dltune.torch.save(trial, step, model, optimizer)
        if trial.should_stop():
            trial.stop(step)

Standard library only; `dltune.torch`, `dltune.lightning` and `dltune.huggingface` import their frameworks when
imported themselves.
"""
from ._study import Study
from ._trial import EXIT_STOPPED, Evaluation, Trial

__version__ = "0.1.0"  # dltune's version (CMakeLists.txt project())
PROTOCOL = 1

_current = None


def trial(defaults=None, max_train_steps=None, **options):
    """The trial this process runs, made once (later calls return the same one).

    Under dltune everything comes from the DLTUNE_* environment. Standalone, the params are `--params FILE_OR_JSON`
    (taken out of sys.argv), else the file in DLTUNE_PARAMS, over `defaults`; the step budget is `max_train_steps`;
    reports go to standard output and checkpoints to ./dltune-trial (or DLTUNE_TRIAL_DIR).
    Options: stop_check_every (calls of should_stop between the ranks' agreements, 10), flush_seconds (1.0).
    """
    global _current
    if _current is None:
        _current = Trial(defaults=defaults, max_train_steps=max_train_steps, **options)
    return _current


def study(name, storage=None, executable=None):
    """A study of a store, for reading its trials and measurements as dicts."""
    return Study(name, storage=storage, executable=executable)


__all__ = ["trial", "study", "Trial", "Study", "Evaluation", "EXIT_STOPPED", "PROTOCOL"]
