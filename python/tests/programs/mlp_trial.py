"""A small PyTorch trial on the client, for the client's tests: an MLP with dropout on a fixed synthetic data set,
data order drawn from (seed, epoch), so that a resumed run is bit-identical to an uninterrupted one.

Test hooks (environment): MLP_TRIAL_SIGTERM_AT=STEP sends itself SIGTERM after that step when not resuming (a stop
request arriving mid-run); MLP_TRIAL_FINAL=PATH writes the final weights' SHA-256 there; MLP_TRIAL_EXPLODE_AT=STEP
reports that step's loss 10^4 times larger (a loss that diverges there); MLP_TRIAL_FLUSH_SECONDS sets the client's
flush_seconds.
"""
import hashlib
import os
import signal

import torch
import torch.nn.functional as F

import dltune
import dltune.torch

trial = dltune.trial(defaults={"learning_rate": 0.05, "batch_size": 32}, max_train_steps=60,
                     flush_seconds=float(os.environ.get("MLP_TRIAL_FLUSH_SECONDS", "1")))
if trial.world_size > 1:
    torch.distributed.init_process_group("gloo")
torch.manual_seed(trial.seed)
torch.set_num_threads(1)

inputs = torch.randn(512, 20, generator=torch.Generator().manual_seed(7))
labels = (inputs[:, :5].sum(1) > 0).long()
valid_inputs, valid_labels = inputs[448:], labels[448:]
train_inputs, train_labels = inputs[:448], labels[:448]

model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(32, 2))
if trial.world_size > 1:
    model = torch.nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=trial.params["learning_rate"], momentum=0.9)
batch = int(trial.params["batch_size"])
per_epoch = len(train_inputs) // batch


def batch_at(step):
    epoch, position = divmod(step - 1, per_epoch)
    generator = torch.Generator().manual_seed((trial.seed * 1000003 + epoch) % 2**63)
    order = torch.randperm(len(train_inputs), generator=generator)
    chosen = order[position * batch:(position + 1) * batch]
    return train_inputs[chosen], train_labels[chosen]


if trial.evaluating:
    step = dltune.torch.load(trial.evaluating.checkpoint, model)
    model.eval()
    with torch.no_grad():
        error = (model(valid_inputs).argmax(1) != valid_labels).float().mean()
    trial.record_evaluation(step, trial.evaluating.split, error_rate=error)
    raise SystemExit(0)

sigterm_at = int(os.environ.get("MLP_TRIAL_SIGTERM_AT", "0"))
explode_at = int(os.environ.get("MLP_TRIAL_EXPLODE_AT", "0"))
start = dltune.torch.restore(trial, model, optimizer)
for step in range(start + 1, trial.max_train_steps + 1):
    model.train()
    x, y = batch_at(step)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    reported = loss.detach() * (1e4 if step == explode_at else 1)
    trial.report(step, loss=reported, learning_rate=trial.params["learning_rate"])
    if trial.evaluates_at(step):
        model.eval()
        with torch.no_grad():
            error = (model(valid_inputs).argmax(1) != valid_labels).float().mean()
        trial.record_evaluation(step, "valid", error_rate=error)
        dltune.torch.save(trial, step, model, optimizer)
    if step == sigterm_at and not trial.resuming:
        os.kill(os.getpid(), signal.SIGTERM)
    if trial.should_stop():
        trial.stop(step)

if os.environ.get("MLP_TRIAL_FINAL") and trial.is_main:
    weights = b"".join(t.detach().numpy().tobytes() for t in dltune.torch._unwrapped(model).state_dict().values())
    with open(os.environ["MLP_TRIAL_FINAL"], "w") as final:
        final.write(hashlib.sha256(weights).hexdigest())
