"""A small PyTorch trial that may start warm (dltune.run): the MLP with dropout of mlp_trial.py, whose set-up makes
its data set with the generators a trial later uses (torch's default one and Python's `random`, both seeded here, and
NumPy's, which dltune.torch's checkpoints hold), so a warm trial matches a cold one only when it starts from the state
the set-up left.

The trial prints what the process looks like to it first (`process: {...}`: its command line, directory, thread
count, signal state, and a draw from each generator before the trial seeds torch's), for the tests to compare.

Test hooks (the trial's environment): WARM_MLP_PAUSE_AT=STEP waits after that step, its lines written, until it is
asked to stop (when not resuming); WARM_MLP_CRASH=abort|raise crashes at step 3; WARM_MLP_FINAL=PATH writes the final
weights' SHA-256 there. In the set-up: WARM_MLP_TRIAL_IN_SETUP=1 makes the trial there (which a set-up must not do);
WARM_MLP_HELPER=1 imports warm_mlp_helper (beside this file); WARM_MLP_SETUP_WAIT=PATH waits until PATH exists.
"""
import argparse
import ctypes
import hashlib
import json
import os
import random
import signal
import sys
import time

import numpy
import torch
import torch.nn.functional as F

import dltune
import dltune.torch

if os.environ.get("WARM_MLP_HELPER") == "1":
    import warm_mlp_helper  # noqa: F401 - a module of the program's own, for the staleness test

if os.environ.get("WARM_MLP_TRIAL_IN_SETUP") == "1":
    dltune.trial(max_train_steps=60)

if os.environ.get("WARM_MLP_SETUP_WAIT"):
    while not os.path.exists(os.environ["WARM_MLP_SETUP_WAIT"]):
        time.sleep(0.01)

# Set-up: the data set, from generators a trial goes on using.
random.seed(11)
numpy.random.seed(13)
torch.manual_seed(5)
inputs = torch.randn(512, 20)
noise = torch.tensor([random.gauss(0.0, 0.1) for _ in range(512)])
labels = (inputs[:, :5].sum(1) + noise > 0).long()
valid_inputs, valid_labels = inputs[448:], labels[448:]
train_inputs, train_labels = inputs[:448], labels[:448]


def handler_name(handler):
    return {signal.SIG_DFL: "default", signal.SIG_IGN: "ignore", signal.default_int_handler: "KeyboardInterrupt",
            None: "not Python's"}.get(handler, "Python function")


def parent_death_signal():
    number = ctypes.c_int(0)
    ctypes.CDLL(None).prctl(2, ctypes.byref(number), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    return number.value  # PR_GET_PDEATHSIG


def train(trial):
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=32)
    args = parser.parse_args()
    signals = {number.name: handler_name(signal.getsignal(number))
               for number in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGHUP, signal.SIGCHLD,
                              signal.SIGUSR1, signal.SIGXFSZ)}
    state = {"argv": sys.argv, "cwd": os.getcwd(), "threads": torch.get_num_threads(), "signals": signals,
             "python_random": random.random(), "numpy_random": numpy.random.random(),
             "torch_random": torch.rand(1).item(),
             "blocked": sorted(int(number) for number in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
             "own_process_group": os.getpgid(0) == os.getpid()}
    print("process:", json.dumps(state, sort_keys=True))
    print("environment:", json.dumps(dict(os.environ), sort_keys=True))
    print("parent death signal:", parent_death_signal())

    torch.manual_seed(trial.seed)
    model = torch.nn.Sequential(torch.nn.Linear(20, args.hidden), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                torch.nn.Linear(args.hidden, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=trial.params["learning_rate"], momentum=0.9)
    batch = int(trial.params["batch_size"])
    per_epoch = len(train_inputs) // batch

    pause_at = int(os.environ.get("WARM_MLP_PAUSE_AT", "0"))
    crash = os.environ.get("WARM_MLP_CRASH", "")
    start = dltune.torch.restore(trial, model, optimizer)
    for step in range(start + 1, trial.max_train_steps + 1):
        model.train()
        epoch, position = divmod(step - 1, per_epoch)
        order = torch.randperm(len(train_inputs),
                               generator=torch.Generator().manual_seed((trial.seed * 1000003 + epoch) % 2**63))
        chosen = order[position * batch:(position + 1) * batch]
        loss = F.cross_entropy(model(train_inputs[chosen]), train_labels[chosen])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        trial.report(step, loss=loss.detach(), learning_rate=trial.params["learning_rate"])
        if step == 3 and crash == "abort":
            os.abort()
        if step == 3 and crash == "raise":
            raise RuntimeError("an injected crash at step 3")
        if trial.evaluates_at(step):
            model.eval()
            with torch.no_grad():
                error = (model(valid_inputs).argmax(1) != valid_labels).float().mean()
            trial.record_evaluation(step, "valid", error_rate=error)
            dltune.torch.save(trial, step, model, optimizer)
        if step == pause_at and not trial.resuming:
            trial.flush()
            waited = time.monotonic()
            while not trial.should_stop() and time.monotonic() - waited < 120:
                time.sleep(0.01)
        if trial.should_stop():
            trial.stop(step)

    if os.environ.get("WARM_MLP_FINAL"):
        weights = b"".join(tensor.detach().numpy().tobytes() for tensor in model.state_dict().values())
        with open(os.environ["WARM_MLP_FINAL"], "w") as final:
            final.write(hashlib.sha256(weights).hexdigest())
    return step


if __name__ == "__main__":
    dltune.run(train, defaults={"learning_rate": 0.05, "batch_size": 32}, max_train_steps=60)
