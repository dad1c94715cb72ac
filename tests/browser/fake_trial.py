#!/usr/bin/env python3
"""A trial program for the report's browser test: it speaks dltune's trial protocol (docs/trial-protocol.md) and
makes up, in a few milliseconds, measurements shaped like a real training run's from its params and seed.

Training loss falls at a speed set by the learning rate; the validation error rate falls, then rises again late for
large learning rates (overfitting); gradient norms are log-normal around a level set by the learning rate; a
learning rate above 0.3 diverges and the trial ends infeasible with a reason holding markup, for the escaping test.
"""
import json
import math
import os
import random
import time

report = open(os.environ["DLTUNE_REPORT"], "a", buffering=1)
params = json.load(open(os.environ["DLTUNE_PARAMS"]))
steps = int(os.environ["DLTUNE_MAX_TRAIN_STEPS"])
trial_dir = os.environ["DLTUNE_TRIAL_DIR"]
rng = random.Random(int(os.environ["DLTUNE_SEED"]))
lr = float(params["learning_rate"])
decay = float(params.get("weight_decay", 0.0))
step_seconds = float(os.environ.get("FAKE_TRIAL_STEP_SECONDS", "0"))  # slow trials for the live dashboard test
bonus = 0.03 if "bold" in str(params.get("optimizer", "")) else 0.0


def send(line):
    report.write(json.dumps(line) + "\n")


send({"type": "start", "step": 0})
speed = 0.004 + 0.08 * lr
floor = 0.08 + 0.05 * abs(math.log10(lr) + 1.3) - bonus + 3 * decay
for step in range(1, steps + 1):
    time.sleep(step_seconds)
    if lr > 0.3 and step == 45:
        send({"type": "train", "step": step, "loss": float("nan")})
        send({"type": "end", "state": "infeasible",
              "reason": "loss is NaN at step 45 <script>alert('reason')</script> & more"})
        raise SystemExit(0)
    loss = 2.3 * math.exp(-speed * step) + floor + rng.gauss(0, 0.02)
    grad_norm = math.exp(rng.gauss(math.log(0.5 + 4 * lr), 0.35))
    send({"type": "train", "step": step, "loss": max(loss, 1e-3), "learning_rate": lr, "grad_norm": grad_norm,
          "clipped": grad_norm > 3.0, "step_time": 0.004, "data_wait": 0.0002})
    if step % 20 == 0 or step == steps:
        fraction = step / steps
        overfit = max(0.0, fraction - 0.6) * 2.5 * lr
        error = min(0.9, 0.9 * math.exp(-speed * step * 1.2) + floor * 0.8 + overfit + rng.gauss(0, 0.005))
        send({"type": "eval", "step": step, "split": "train",
              "metrics": {"error_rate": max(0.0, error - 0.02), "loss": loss}, "examples": 1000})
        send({"type": "eval", "step": step, "split": "valid", "metrics": {"error_rate": error, "loss": loss + 0.05},
              "examples": 500})
        path = os.path.join(trial_dir, f"checkpoint_{step:05d}.txt")
        with open(path, "w") as checkpoint:
            checkpoint.write(f"step {step}\n")
        send({"type": "checkpoint", "step": step, "path": os.path.basename(path), "objective": error})
