#!/usr/bin/python3
"""A complete external trial program for dltune: a PyTorch MLP (784-hidden-10, ReLU) on Fashion-MNIST.

It speaks the trial protocol of docs/trial-protocol.md (version 1) and needs nothing from dltune: params come from
the JSON file named by DLTUNE_PARAMS, the trial's settings from DLTUNE_TRIAL, and every measurement goes as one JSON
line to DLTUNE_REPORT.

Params read (from DLTUNE_PARAMS; any other param is an error naming it, so a typo never trains the default):

  learning_rate                       required; constant for the whole run
  optimizer                           nesterov (default), momentum, sgd or adam
  one_minus_momentum | momentum       momentum and nesterov: gamma (default 0.9), torch.optim.SGD's momentum
  one_minus_beta1 | beta1             adam: beta1 (default 0.9)
  one_minus_beta2 | beta2             adam: beta2 (default 0.999)
  epsilon                             adam: default 1e-8
  weight_decay                        L2 added to the gradient (torch.optim's weight_decay), default 0
  batch_size                          default 128
  grad_clip_norm                      clip by the global gradient norm; default 0 (off)
  hidden                              width of the hidden layer, default 256; --hidden N wins over it

The update rules are torch.optim's (SGD with nesterov=True equals the playbook's Nesterov at a constant learning
rate). The data and model are dltune's fashion_mnist_mlp workload: train = the first 50,000 training images, valid =
the last 10,000, test = t10k; pixels scaled to [0, 1] and standardized inside the model with mean 0.2860 and std
0.3530; default PyTorch initialization from the trial's seed.

What one run does, following dltune's own trainer (docs/training.md):

- start: sends {"type": "start", "step": S}, S = 0 or the step of the checkpoint it resumed from.
- each step: one batch (the order of epoch e is a permutation drawn from (seed, e); an epoch's last partial batch is
  dropped), forward, cross-entropy, backward, global gradient norm, optional clipping, update; one `train` line with
  loss, learning_rate, grad_norm, clipped (when clipping is on), step_time, data_wait (the batch gathering, part of
  step_time) and examples_per_second.
- every training.eval_every_steps steps (0: max_train_steps / 10) and at the last step: `eval` lines for a fixed
  10,000-example subset of train, valid (or a fixed valid_sample of training.valid_sample_examples at periodic
  evaluations, the whole valid split at the end), and test at the end when training.test_at_end; metrics loss,
  error_rate and accuracy; evaluation batches are twice the training batch. Then a checkpoint, written atomically
  (temporary file, fsync, os.replace) to checkpoints/step_NNNNNNNN.pt in the trial directory and reported with the
  objective's value. dltune manages retention (this program never sends manages_checkpoints).
- divergence: a NaN or infinite loss, or a loss above training.divergence_factor times the first loss, or a
  non-finite evaluation metric, sends {"type": "end", "state": "infeasible", "reason": ...} and exits 0.
- stopping: SIGTERM (or SIGINT) lets the current step finish, writes a checkpoint of that step and exits 75.
- resuming: with DLTUNE_RESUMING=1 it loads the newest checkpoint that loads (model, optimizer, step, random
  generator state, data position; an unreadable one is skipped for the next older) and continues from its step, so
  the series has no gap and no duplicated step, and the result is bit-identical to an uninterrupted run.

- evaluating (dltune evaluate and launch, through the spec's evaluate_command): with --evaluate CHECKPOINT --split
  SPLIT it loads the checkpoint, evaluates the split as training evaluated it and sends one `eval` line.

Exit status: 0 completed or infeasible (the end line says which), 75 stopped and resumable, 2 a mistake in the
params, the arguments or the data, anything else a crash.

Under dltune (a study with `command: ... examples/external/train.py --hidden {hidden}`) nothing needs to be given on
the command line. For debugging without dltune, leave DLTUNE_REPORT unset: report lines go to standard output, and
the params come from --params FILE (or DLTUNE_PARAMS):

  echo '{"learning_rate": 0.05, "one_minus_momentum": 0.1}' > /tmp/params.json
  /usr/bin/python3 examples/external/train.py --params /tmp/params.json --steps 300 --eval-every 100 \\
      --trial-dir /tmp/mlp_trial            # Ctrl-C stops it with a checkpoint; add --resume to continue

(Without dltune nothing deletes checkpoints: every evaluation's stays in TRIAL_DIR/checkpoints.)

Options given on the command line win over the DLTUNE_* environment, which wins over trial.json and the defaults.
tools/fake_dltune_worker.py checks this program against the protocol (stop, kill, resume, divergence).
"""
import signal
import sys

# Installed before the slow imports, so a SIGTERM that arrives while torch loads still ends in a clean stop (exit 75)
# rather than death by signal, which dltune would record as a failure.
_stop_requested = False


def _request_stop(signum, _frame):
    global _stop_requested
    if _stop_requested:  # the second signal: give up at once (dltune sends SIGKILL instead)
        raise KeyboardInterrupt
    _stop_requested = True


signal.signal(signal.SIGTERM, _request_stop)
signal.signal(signal.SIGINT, _request_stop)

import argparse  # noqa: E402
import gzip  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

PROTOCOL = 1
EXIT_STOPPED = 75  # EX_TEMPFAIL: stopped with a checkpoint, resumable
EXIT_USAGE = 2
MEAN = 0.2860  # Fashion-MNIST training pixel statistics, as dltune's workload standardizes with
STD = 0.3530
TRAIN_SIZE = 50_000
VALID_SIZE = 10_000
TRAIN_EVAL_EXAMPLES = 10_000
CHECKPOINT_FORMAT = "dltune-external-mlp-1"
CHECKPOINT_NAME = re.compile(r"^step_(\d{8})\.pt$")
MASK64 = (1 << 64) - 1

# Seed streams: each random choice has its own generator derived from (seed, stream).
STREAM_TRAIN_SUBSET = 1
STREAM_VALID_SAMPLE = 2
STREAM_EPOCH = 1 << 20  # + epoch


class UsageError(Exception):
    """A mistake in the arguments, params or data: exit status 2 with the message."""


def mix_seed(seed, stream):
    """A seed below 2^63 for random stream `stream` of `seed` (SplitMix64's finalizer)."""
    z = (seed + 0x9E3779B97F4A7C15 * (stream + 1)) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return (z ^ (z >> 31)) >> 1


# ---------------------------------------------------------------------------------------------------------------
# Configuration


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, help="hidden layer width (default: param `hidden`, else 256)")
    parser.add_argument("--params", help="params JSON file (default: $DLTUNE_PARAMS)")
    parser.add_argument("--steps", type=int, help="training steps (default: $DLTUNE_MAX_TRAIN_STEPS, else 1000)")
    parser.add_argument("--seed", type=int, help="seed (default: $DLTUNE_SEED, else 0)")
    parser.add_argument("--trial-dir", help="directory for checkpoints (default: $DLTUNE_TRIAL_DIR, else "
                                            "runs/external_debug)")
    parser.add_argument("--eval-every", type=int, help="evaluate every N steps (default: trial.json's "
                                                       "training.eval_every_steps, else steps / 10)")
    parser.add_argument("--threads", type=int, help="torch threads (default: $DLTUNE_THREADS, else 1)")
    parser.add_argument("--resume", action="store_true", help="resume from the newest checkpoint (as "
                                                              "DLTUNE_RESUMING=1)")
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--evaluate", metavar="CHECKPOINT",
                        help="evaluate this checkpoint on --split instead of training (dltune's evaluate_command)")
    parser.add_argument("--split", default="test", help="with --evaluate: train, valid or test (default test)")
    return parser.parse_args(argv)


def env_int(name, default):
    value = os.environ.get(name, "")
    if value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{name} must be a whole number, not {value!r}") from None


def read_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot read the {what} {path}: {error}") from None
    if not isinstance(value, dict):
        raise UsageError(f"the {what} {path} is not a JSON object")
    return value


class Params:
    """The trial's params, each read at most once; unread ones are reported as errors by check_all_read()."""

    def __init__(self, values):
        self._values = dict(values)
        self._read = set()

    @property
    def values(self):
        return dict(self._values)

    def number(self, name, default=None, *, integer=False):
        self._read.add(name)
        value = self._values.get(name, default)
        if value is None:
            raise UsageError(f"param {name} is required")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise UsageError(f"param {name} must be a finite number, not {value!r}")
        if integer:
            if value != int(value):
                raise UsageError(f"param {name} must be a whole number, not {value!r}")
            return int(value)
        return float(value)

    def text(self, name, default):
        self._read.add(name)
        value = self._values.get(name, default)
        if not isinstance(value, str):
            raise UsageError(f"param {name} must be text, not {value!r}")
        return value

    def gamma(self, name, default):
        """`name` or `one_minus_<name>` (the playbook searches 1 - momentum on a log scale); not both."""
        complement = f"one_minus_{name}"
        self._read.update((name, complement))
        if name in self._values and complement in self._values:
            raise UsageError(f"give param {name} or {complement}, not both")
        if complement in self._values:
            return 1.0 - self.number(complement)
        return self.number(name, default)

    def check_all_read(self, context):
        unread = sorted(set(self._values) - self._read)
        if unread:
            raise UsageError(f"param(s) {', '.join(unread)} not read {context}; it reads "
                             f"{', '.join(sorted(self._read))}")


class Config:
    """Everything the run needs, from the command line, the DLTUNE_* environment and trial.json."""

    def __init__(self, args):
        self.report_path = os.environ.get("DLTUNE_REPORT") or None
        if os.environ.get("DLTUNE_PROTOCOL", str(PROTOCOL)) != str(PROTOCOL):
            print(f"train.py: speaks protocol {PROTOCOL}, dltune asked for {os.environ['DLTUNE_PROTOCOL']}",
                  file=sys.stderr)

        trial_path = os.environ.get("DLTUNE_TRIAL")
        trial = read_json(trial_path, "trial file") if trial_path else {}
        training = trial.get("training") or {}
        params_path = args.params or os.environ.get("DLTUNE_PARAMS")
        if not params_path:
            raise UsageError("no params: DLTUNE_PARAMS is unset; give --params FILE")
        params = Params(read_json(params_path, "params file"))

        self.max_train_steps = args.steps if args.steps is not None else env_int("DLTUNE_MAX_TRAIN_STEPS", 1000)
        self.seed = args.seed if args.seed is not None else env_int("DLTUNE_SEED", 0)
        self.threads = args.threads if args.threads is not None else env_int("DLTUNE_THREADS", 1)
        self.trial_dir = args.trial_dir or os.environ.get("DLTUNE_TRIAL_DIR") or "runs/external_debug"
        self.resuming = args.resume or os.environ.get("DLTUNE_RESUMING") == "1"
        self.data_dir = args.data_dir
        eval_every = args.eval_every if args.eval_every is not None else int(training.get("eval_every_steps", 0))
        self.eval_every = eval_every if eval_every > 0 else max(1, self.max_train_steps // 10)
        self.test_at_end = bool(training.get("test_at_end", False))
        self.valid_sample_examples = int(training.get("valid_sample_examples", 0))
        self.divergence_factor = float(training.get("divergence_factor", 100))
        objective = (trial.get("objective") or {}).get("metric", "valid/error_rate")
        self.objective_split, _, self.objective_metric = objective.partition("/")
        if self.max_train_steps < 1:
            raise UsageError(f"max_train_steps must be >= 1, not {self.max_train_steps}")
        if self.threads < 1:
            raise UsageError(f"threads must be >= 1, not {self.threads}")
        if not 0 <= self.seed < 1 << 63:
            raise UsageError(f"seed must be in [0, 2^63), not {self.seed}")

        self.learning_rate = params.number("learning_rate")
        self.optimizer = params.text("optimizer", "nesterov")
        if self.optimizer not in ("nesterov", "momentum", "sgd", "adam"):
            raise UsageError(f"param optimizer must be nesterov, momentum, sgd or adam, not {self.optimizer!r}")
        # Optimizer-specific params are read only by the optimizer that uses them, so a stray one is an error.
        if self.optimizer in ("nesterov", "momentum"):
            self.momentum = params.gamma("momentum", 0.9)
        if self.optimizer == "adam":
            self.beta1 = params.gamma("beta1", 0.9)
            self.beta2 = params.gamma("beta2", 0.999)
            self.epsilon = params.number("epsilon", 1e-8)
        self.weight_decay = params.number("weight_decay", 0.0)
        self.batch_size = params.number("batch_size", 128, integer=True)
        self.grad_clip_norm = params.number("grad_clip_norm", 0.0)
        hidden_param = params.number("hidden", 256, integer=True)
        self.hidden = args.hidden if args.hidden is not None else hidden_param
        params.check_all_read(f"by this program with optimizer {self.optimizer}")
        self.params = params.values
        if not 1 <= self.batch_size <= TRAIN_SIZE:
            raise UsageError(f"param batch_size must be in [1, {TRAIN_SIZE}], not {self.batch_size}")
        if self.hidden < 1:
            raise UsageError(f"hidden must be >= 1, not {self.hidden}")


# ---------------------------------------------------------------------------------------------------------------
# Reporting


class Reporter:
    """Writes protocol lines to DLTUNE_REPORT (opened once for appending), or to stdout when it is unset."""

    def __init__(self, path):
        # Opening a FIFO for writing blocks until dltune has its end open, which it has before starting us.
        self._file = open(path, "a", encoding="utf-8") if path else sys.stdout
        # Human progress goes where it does not mix with report lines.
        self.log_file = sys.stdout if path else sys.stderr

    def send(self, **line):
        # json.dumps writes NaN / Infinity for a diverged loss, which the protocol accepts for train losses only.
        self._file.write(json.dumps(line) + "\n")
        self._file.flush()

    def log(self, text):
        print(f"train.py: {text}", file=self.log_file, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# Data and model


def read_idx(path, header_bytes):
    """The payload of a gzip'd IDX file as uint8."""
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise UsageError(f"{path}: {error}; install Fashion-MNIST with: apt-get install dataset-fashion-mnist") \
            from None
    return np.frombuffer(data, dtype=np.uint8, offset=header_bytes)


def load_split(data_dir, prefix, size):
    """(x float32 [size, 784] in [0, 1], y int64 [size]) from one IDX image/label pair."""
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), 16)
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), 8)
    if images.size != size * 784 or labels.size != size:
        raise UsageError(f"{data_dir}: {prefix} does not hold {size} Fashion-MNIST images")
    x = torch.from_numpy(images.reshape(size, 784).astype(np.float32) / 255.0)
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


def fixed_sample(x, y, count, seed):
    """`count` examples of (x, y) chosen once from `seed`, in their original order."""
    if count >= x.shape[0]:
        return x, y
    rows = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed))[:count].sort().values
    return x[rows], y[rows]


class Standardize(nn.Module):
    """(x - 0.2860) / 0.3530, inside the model as in dltune's workload."""

    def forward(self, x):
        return (x - MEAN) / STD


def build_model(hidden, seed):
    torch.manual_seed(seed)
    return nn.Sequential(Standardize(), nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def build_optimizer(config, parameters):
    if config.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=config.learning_rate, betas=(config.beta1, config.beta2),
                                eps=config.epsilon, weight_decay=config.weight_decay)
    momentum = config.momentum if config.optimizer in ("nesterov", "momentum") else 0.0
    return torch.optim.SGD(parameters, lr=config.learning_rate, momentum=momentum,
                           nesterov=config.optimizer == "nesterov", weight_decay=config.weight_decay)


class Batches:
    """Training batches by step: batch k depends only on (seed, k), so a resumed run sees the same batches."""

    def __init__(self, x, y, batch_size, seed):
        self.x, self.y, self.batch_size, self.seed = x, y, batch_size, seed
        self.per_epoch = x.shape[0] // batch_size  # the last partial batch is dropped
        self._epoch, self._order = -1, None

    def position(self, step):
        """(epoch, batch within the epoch) of the batch that step `step` + 1 trains on."""
        return divmod(step, self.per_epoch)

    def get(self, step):
        epoch, index = self.position(step)
        if epoch != self._epoch:
            generator = torch.Generator().manual_seed(mix_seed(self.seed, STREAM_EPOCH + epoch))
            self._epoch, self._order = epoch, torch.randperm(self.x.shape[0], generator=generator)
        rows = self._order[index * self.batch_size:(index + 1) * self.batch_size]
        return self.x[rows], self.y[rows]


def evaluate(model, x, y, batch_size):
    """{loss, error_rate, accuracy}: exact per-example averages over (x, y), under no_grad."""
    model.eval()
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for begin in range(0, x.shape[0], batch_size):
            outputs = model(x[begin:begin + batch_size])
            labels = y[begin:begin + batch_size]
            loss_sum += F.cross_entropy(outputs, labels, reduction="sum").item()
            correct += (outputs.argmax(1) == labels).sum().item()
    model.train()
    accuracy = correct / x.shape[0]
    return {"loss": loss_sum / x.shape[0], "error_rate": 1.0 - accuracy, "accuracy": accuracy}


def global_grad_norm(parameters):
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in parameters])).item()


# ---------------------------------------------------------------------------------------------------------------
# Checkpoints


def checkpoint_dir(config):
    return os.path.join(config.trial_dir, "checkpoints")


def checkpoint_relpath(step):
    return f"checkpoints/step_{step:08d}.pt"


def save_checkpoint(config, state):
    """Writes `state` atomically; returns (path relative to the trial dir, "sha256:...")."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    data = buffer.getvalue()
    relpath = checkpoint_relpath(state["step"])
    path = os.path.join(config.trial_dir, relpath)
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)  # readers see the old file or the whole new one, never a torn one
    directory = os.open(checkpoint_dir(config), os.O_RDONLY)
    try:
        os.fsync(directory)  # makes the rename itself durable
    finally:
        os.close(directory)
    return relpath, "sha256:" + hashlib.sha256(data).hexdigest()


def list_checkpoints(config):
    """[(step, path)] of the checkpoint files, newest first."""
    found = []
    for name in os.listdir(checkpoint_dir(config)):
        match = CHECKPOINT_NAME.match(name)
        if match:
            found.append((int(match.group(1)), os.path.join(checkpoint_dir(config), name)))
    return sorted(found, reverse=True)


def load_newest_checkpoint(config, reporter):
    """The newest checkpoint that loads and belongs to this trial, or None; under dltune only one at or before
    DLTUNE_RESUME_MAX_STEP (a newer one was written after the last measurements dltune recorded)."""
    limit = os.environ.get("DLTUNE_RESUME_MAX_STEP")
    for step, path in list_checkpoints(config):
        if limit is not None and step > int(limit):
            continue
        try:
            state = torch.load(path, map_location="cpu")
        except Exception as error:  # a damaged file: fall back to the next older one
            reporter.log(f"skipping checkpoint {path}: {error}")
            continue
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT or state.get("step") != step:
            reporter.log(f"skipping checkpoint {path}: not a checkpoint of this program")
            continue
        for key, expected in (("seed", config.seed), ("hidden", config.hidden), ("params", config.params),
                              ("batch_size", config.batch_size)):
            if state.get(key) != expected:
                raise UsageError(f"checkpoint {path} has {key} {state.get(key)!r}, this trial {expected!r}: "
                                 "it belongs to another trial")
        return state
    return None


def prepare_checkpoint_dir(config, reporter):
    os.makedirs(checkpoint_dir(config), exist_ok=True)
    for name in os.listdir(checkpoint_dir(config)):
        # Temporary files of an attempt killed while saving; and on a fresh start, the checkpoints of an earlier
        # attempt, which a later resume must not mistake for this attempt's.
        if ".pt.tmp" in name or (not config.resuming and CHECKPOINT_NAME.match(name)):
            reporter.log(f"removing {name} from an earlier attempt")
            os.remove(os.path.join(checkpoint_dir(config), name))


# ---------------------------------------------------------------------------------------------------------------
# Training


class Trial:
    def __init__(self, config, reporter):
        self.config, self.reporter = config, reporter
        torch.set_num_threads(config.threads)
        torch.set_num_interop_threads(1)

        train_x, train_y = load_split(config.data_dir, "train", TRAIN_SIZE + VALID_SIZE)
        self.train_x, self.train_y = train_x[:TRAIN_SIZE], train_y[:TRAIN_SIZE]
        self.valid_x, self.valid_y = train_x[TRAIN_SIZE:], train_y[TRAIN_SIZE:]
        self.test = load_split(config.data_dir, "t10k", 10_000) if config.test_at_end else None
        self.train_subset = fixed_sample(self.train_x, self.train_y, TRAIN_EVAL_EXAMPLES,
                                         mix_seed(config.seed, STREAM_TRAIN_SUBSET))
        self.valid_sample = None
        if config.valid_sample_examples > 0:
            self.valid_sample = fixed_sample(self.valid_x, self.valid_y, config.valid_sample_examples,
                                             mix_seed(config.seed, STREAM_VALID_SAMPLE))
        self.eval_batch_size = 2 * config.batch_size
        self.batches = Batches(self.train_x, self.train_y, config.batch_size, config.seed)

        self.model = build_model(config.hidden, config.seed)
        self.optimizer = build_optimizer(config, self.model.parameters())
        self.parameters = list(self.model.parameters())
        self.step = 0
        self.first_loss = None  # the divergence test's reference, kept across resumes
        self.last_checkpoint_step = None

    def resume(self):
        """Loads the newest checkpoint when resuming; returns the step to start from."""
        prepare_checkpoint_dir(self.config, self.reporter)
        state = load_newest_checkpoint(self.config, self.reporter) if self.config.resuming else None
        if state is None:
            return 0
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        self.step = state["step"]
        self.first_loss = state["first_loss"]
        if tuple(state["data_position"]) != self.batches.position(self.step):
            raise UsageError(f"checkpoint of step {self.step} has data position {state['data_position']}, "
                             f"expected {self.batches.position(self.step)}")
        self.last_checkpoint_step = self.step
        self.reporter.log(f"resumed from {checkpoint_relpath(self.step)}")
        return self.step

    def checkpoint(self, objective=None):
        state = {
            "format": CHECKPOINT_FORMAT,
            "step": self.step,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(),  # unused by this model (no dropout), kept for programs that add it
            "data_position": self.batches.position(self.step),
            "first_loss": self.first_loss,
            "seed": self.config.seed,
            "hidden": self.config.hidden,
            "batch_size": self.config.batch_size,
            "params": self.config.params,
        }
        relpath, checksum = save_checkpoint(self.config, state)
        line = {"type": "checkpoint", "step": self.step, "path": relpath, "checksum": checksum}
        if objective is not None:
            line["objective"] = objective
        self.reporter.send(**line)
        self.last_checkpoint_step = self.step

    def infeasible(self, reason):
        self.reporter.send(type="end", state="infeasible", reason=reason)
        self.reporter.log(f"infeasible: {reason}")
        return 0

    def train_step(self):
        """One update; returns the reason the trial is infeasible, or None."""
        start = time.perf_counter()
        inputs, labels = self.batches.get(self.step)
        data_wait = time.perf_counter() - start
        self.optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(inputs), labels)
        loss.backward()
        loss_value = loss.item()
        self.step += 1
        line = {"type": "train", "step": self.step, "loss": loss_value, "learning_rate": self.config.learning_rate}
        if not math.isfinite(loss_value):
            self.reporter.send(**line)  # the diverged loss itself is reported (NaN / Infinity allowed here)
            return f"loss is {loss_value} at step {self.step}"
        grad_norm = global_grad_norm(self.parameters)
        clipped = False
        if self.config.grad_clip_norm > 0 and grad_norm > self.config.grad_clip_norm:
            torch.nn.utils.clip_grad_norm_(self.parameters, self.config.grad_clip_norm)
            clipped = True
        self.optimizer.step()
        step_time = time.perf_counter() - start
        if math.isfinite(grad_norm):  # only the loss may be non-finite in a report line
            line["grad_norm"] = grad_norm
        if self.config.grad_clip_norm > 0:
            line["clipped"] = clipped
        line.update(step_time=step_time, data_wait=data_wait, examples_per_second=self.config.batch_size / step_time)
        self.reporter.send(**line)

        if self.first_loss is None:
            self.first_loss = loss_value
        factor = self.config.divergence_factor
        if factor > 0 and loss_value > factor * self.first_loss:
            return (f"loss {loss_value:.6g} at step {self.step} is above divergence_factor {factor:g} times the "
                    f"first loss {self.first_loss:.6g}")
        return None

    def evaluate(self, last):
        """Reports the evaluations of this step; returns (objective value or None, infeasible reason or None)."""
        splits = [("train", self.train_subset)]
        if self.valid_sample is not None:
            splits.append(("valid_sample", self.valid_sample))
        if self.valid_sample is None or last:
            splits.append(("valid", (self.valid_x, self.valid_y)))
        if last and self.test is not None:
            splits.append(("test", self.test))
        results = {}
        for split, (x, y) in splits:
            metrics = evaluate(self.model, x, y, self.eval_batch_size)
            bad = [name for name, value in metrics.items() if not math.isfinite(value)]
            if bad:
                return None, f"{split} {bad[0]} is {metrics[bad[0]]} at step {self.step}"
            self.reporter.send(type="eval", step=self.step, split=split, metrics=metrics, examples=int(x.shape[0]))
            results[split] = metrics
        # The objective's split, or its periodic sample when the whole split was not evaluated (as dltune does).
        objective = None
        for split in (self.config.objective_split, self.config.objective_split + "_sample"):
            if objective is None and split in results:
                objective = results[split].get(self.config.objective_metric)
        self.reporter.log("step {}: {}".format(self.step, "  ".join(
            f"{split} loss {m['loss']:.4f} error {m['error_rate']:.4f}" for split, m in results.items())))
        return objective, None

    def run(self):
        config = self.config
        start_step = self.resume()
        self.reporter.send(type="start", step=start_step)
        while self.step < config.max_train_steps:
            if _stop_requested:
                if self.last_checkpoint_step != self.step:
                    self.checkpoint()
                self.reporter.log(f"stopped at step {self.step}; resumable")
                return EXIT_STOPPED
            reason = self.train_step()
            if reason:
                return self.infeasible(reason)
            last = self.step == config.max_train_steps
            if last or self.step % config.eval_every == 0:
                objective, reason = self.evaluate(last)
                if reason:
                    return self.infeasible(reason)
                self.checkpoint(objective)
        self.reporter.send(type="end", state="completed")
        return 0


def evaluate_checkpoint(config, reporter, path, split):
    """dltune's evaluate_command: one `eval` line of `split` for the model in checkpoint `path`, evaluated exactly as
    training evaluated it (the same subset of train, the same batches)."""
    torch.set_num_threads(config.threads)
    try:
        state = torch.load(path, map_location="cpu")
    except Exception as error:
        raise UsageError(f"cannot read checkpoint {path}: {error}") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise UsageError(f"{path} is not a checkpoint of this program")
    for key, expected in (("seed", config.seed), ("hidden", config.hidden), ("params", config.params)):
        if state.get(key) != expected:
            raise UsageError(f"checkpoint {path} has {key} {state.get(key)!r}, this trial {expected!r}")
    model = build_model(config.hidden, config.seed)
    model.load_state_dict(state["model"])
    train_x, train_y = load_split(config.data_dir, "train", TRAIN_SIZE + VALID_SIZE)
    if split == "train":
        x, y = fixed_sample(train_x[:TRAIN_SIZE], train_y[:TRAIN_SIZE], TRAIN_EVAL_EXAMPLES,
                            mix_seed(config.seed, STREAM_TRAIN_SUBSET))
    elif split == "valid":
        x, y = train_x[TRAIN_SIZE:], train_y[TRAIN_SIZE:]
    elif split == "test":
        x, y = load_split(config.data_dir, "t10k", 10_000)
    else:
        raise UsageError(f"--split must be train, valid or test, not {split!r}")
    metrics = evaluate(model, x, y, 2 * config.batch_size)
    reporter.send(type="eval", step=state["step"], split=split, metrics=metrics, examples=int(x.shape[0]))
    return 0


def main(argv):
    try:
        args = parse_args(argv)
        config = Config(args)
        reporter = Reporter(config.report_path)
        if args.evaluate:
            return evaluate_checkpoint(config, reporter, args.evaluate, args.split)
        return Trial(config, reporter).run()
    except UsageError as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
