"""A trial without a framework, for the client's tests: step i reports the i-th loss of SERIES_LOSSES (a JSON list;
"nan" and "inf" as strings), and at each step of the study's evaluation schedule it evaluates error_rate 0.5 and
reports a checkpoint file. It appends each step it trains to trial.dir/steps_done.

SERIES_ON_DEVICE=1 reports each loss as a value that says it lives on a GPU, so that the client reads it only when it
writes the batch; SERIES_FLUSH_SECONDS is the client's flush_seconds (default 3600: batches are written at the
evaluations).
"""
import json
import os

import dltune
from device_loss import DeviceLoss  # beside this file, on the path of a script run by name


trial = dltune.trial(flush_seconds=float(os.environ.get("SERIES_FLUSH_SECONDS", "3600")))
losses = [float(loss) for loss in json.loads(os.environ["SERIES_LOSSES"])]
on_device = os.environ.get("SERIES_ON_DEVICE") == "1"
trial.record_start(0)
for step in range(1, trial.max_train_steps + 1):
    with open(trial.dir / "steps_done", "a", encoding="utf-8") as done:
        done.write(f"{step}\n")
    loss = losses[min(step, len(losses)) - 1]
    trial.report(step, loss=DeviceLoss(loss) if on_device else loss)
    if trial.evaluates_at(step):
        trial.record_evaluation(step, "valid", error_rate=0.5)
        path = trial.dir / "checkpoints" / f"step_{step:08d}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"{step}\n")
        trial.record_checkpoint(step, path.relative_to(trial.dir))
    if trial.should_stop():
        trial.stop(step)
