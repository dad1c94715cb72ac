"""Warm trial processes of a Python program (dltune.run; docs/trial-protocol.md, "Warm trial processes (Python
programs)"), on the CPU with Debian's python3-torch.

A fake worker plays the worker's side here: this process becomes a child subreaper, starts the program as its server
(DLTUNE_WARM_SERVER=3, its end of a SOCK_SEQPACKET socket on descriptor 3), sends it requests carrying the trial's
standard output, standard error and report channel (a pipe, read as dltune reads it), and waits for the trials it
forks, which are re-parented to it. The same trials run cold (exec'd) for comparison.
"""
import ctypes
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import unittest

HERE = pathlib.Path(__file__).resolve().parent
CLIENT = HERE.parent
PROGRAM = HERE / "programs" / "warm_mlp.py"
HELPER = HERE / "programs" / "warm_mlp_helper.py"
COLD_PROGRAM = HERE / "programs" / "mlp_trial.py"
PYTHON = os.environ.get("DLTUNE_TEST_PYTHON", "/usr/bin/python3")
PR_SET_CHILD_SUBREAPER = 36
TIMEOUT = 300

sys.path.insert(0, str(CLIENT))
from dltune import _warm  # noqa: E402  (the client under test, from the source tree)


def setUpModule():
    # The worker is a child subreaper: the trials, orphaned when their intermediate process exits, become its own.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def base_environment():
    """The worker's environment, as a trial and the server both start from it: without dltune's own variables."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("DLTUNE_")}
    environment["PYTHONPATH"] = str(CLIENT)
    return environment


def spawn(argv, environment, fds):
    """Starts argv in a process group of its own, with /dev/null on 0 and `fds` ({number: descriptor}) in place,
    as the worker starts a trial or a server."""
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)]
    actions += [(os.POSIX_SPAWN_DUP2, source, number) for number, source in sorted(fds.items())]
    return os.posix_spawn(argv[0], argv, environment, file_actions=actions, setpgroup=0, setsigmask=())


def wait(pid, timeout=TIMEOUT):
    """The process's wait status; it is killed after `timeout` seconds (a hung trial fails its test)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"process {pid} ran past {timeout} s")
        time.sleep(0.01)


def exit_code(status):
    return os.waitstatus_to_exitcode(status)


def append_fd(path):
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)


class Report:
    """A trial's report channel: a pipe whose lines are read, and timed, as they arrive."""

    def __init__(self):
        self.read_end, self.write_end = os.pipe()
        self.lines = []  # (arrival, text)
        self.done = False
        self._condition = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        pending = b""
        with os.fdopen(self.read_end, "rb", buffering=0) as channel:
            while True:
                chunk = channel.read(1 << 16)
                arrival = time.monotonic()
                if not chunk:
                    break
                pending += chunk
                *complete, pending = pending.split(b"\n")
                with self._condition:
                    self.lines += [(arrival, line.decode()) for line in complete]
                    self._condition.notify_all()
        with self._condition:
            self.done = True
            self._condition.notify_all()

    def close_write_end(self):
        if self.write_end is not None:
            os.close(self.write_end)
            self.write_end = None

    def wait_for(self, predicate, timeout=TIMEOUT):
        """Waits until a line satisfies `predicate` (given the line as a dict); False when the channel closed first."""
        with self._condition:
            found = self._condition.wait_for(
                lambda: any(predicate(json.loads(text)) for _, text in self.lines) or self.done, timeout)
            return found and any(predicate(json.loads(text)) for _, text in self.lines)

    def texts(self):
        """Every line, once the channel is closed (every writer gone)."""
        self._thread.join(TIMEOUT)
        return [text for _, text in self.lines]

    def first_arrival(self):
        self._thread.join(TIMEOUT)
        return self.lines[0][0] if self.lines else None


class Trial:
    """One trial's directory and environment, as dltune prepares them (docs/trial-protocol.md, "Starting a
    trial"), its report channel on descriptor 3."""

    def __init__(self, root, name, steps=60, eval_every=6, seed=3, params=None):
        self.dir = pathlib.Path(root) / name
        self.dir.mkdir(parents=True)
        self.steps, self.seed = steps, seed
        params = params or {"learning_rate": 0.1, "batch_size": 32}
        (self.dir / "params.json").write_text(json.dumps(params))
        owner = {"study": "warm_test", "study_uid": "0123456789ab", "trial": 0, "seed": seed, "params_sha256": "x"}
        (self.dir / "trial.json").write_text(json.dumps(
            {"protocol": 1, "study": "warm_test", "number": 0, "seed": seed, "max_train_steps": steps,
             "objective": {"metric": "valid/error_rate", "direction": "minimize"}, "checkpoint_owner": owner,
             "params": params, "training": {"eval_every_steps": eval_every, "divergence_factor": 100}}))
        self.report = None

    def environment(self, resuming=False, resume_max_step=0, threads=1, extra=None):
        environment = base_environment()
        environment.update({
            "DLTUNE_PROTOCOL": "1", "DLTUNE_REPORT": "/dev/fd/3", "DLTUNE_PARAMS": str(self.dir / "params.json"),
            "DLTUNE_TRIAL": str(self.dir / "trial.json"), "DLTUNE_TRIAL_DIR": str(self.dir),
            "DLTUNE_RESUMING": "1" if resuming else "0", "DLTUNE_RESUME_MAX_STEP": str(resume_max_step),
            "DLTUNE_TRIAL_NUMBER": "0", "DLTUNE_SEED": str(self.seed), "DLTUNE_MAX_TRAIN_STEPS": str(self.steps),
            "DLTUNE_THREADS": str(threads), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "OMP_WAIT_POLICY": "PASSIVE", "DLTUNE_TRIAL_TOKEN": f"token-{self.dir.name}",
            "WARM_MLP_FINAL": str(self.dir / "final.sha256")})
        environment.update(extra or {})
        return environment

    def descriptors(self):
        """The trial's standard output, standard error and report channel, as the worker opens them."""
        self.report = Report()
        return [append_fd(self.dir / "stdout.log"), append_fd(self.dir / "stderr.log"), self.report.write_end]

    def run_cold(self, command, cwd, environment):
        """Runs the trial by exec, as the worker does (`exec COMMAND` with /bin/sh, in `cwd`); its wait status."""
        out, err, report = self.descriptors()
        began = time.monotonic()
        pid = spawn(["/bin/sh", "-c", f"cd {shlex.quote(str(cwd))} && exec {command}"], environment,
                    {1: out, 2: err, 3: report})
        for fd in (out, err):
            os.close(fd)
        self.report.close_write_end()
        status = wait(pid)
        self.start_seconds = self.report.first_arrival() - began
        return status

    def lines(self, kind=None):
        return [json.loads(text) for text in self.report.texts() if kind is None or json.loads(text)["type"] == kind]

    def stdout(self):
        return (self.dir / "stdout.log").read_text()

    def stderr(self):
        return (self.dir / "stderr.log").read_text()

    def process_state(self):
        return json.loads(re.search(r"^process: (.*)$", self.stdout(), re.M).group(1))

    def parent_death_signal(self):
        return int(re.search(r"^parent death signal: (\d+)$", self.stdout(), re.M).group(1))

    def environment_seen(self):
        return json.loads(re.search(r"^environment: (.*)$", self.stdout(), re.M).group(1))

    def final(self):
        return (self.dir / "final.sha256").read_text()


class FakeWorker:
    """The worker's side of a program server: starts it, asks it for trials, closes its socket."""

    def __init__(self, root, command, cwd, extra=None):
        self.root = pathlib.Path(root)
        self.log = self.root / "warm-server.log"
        self.command = command
        self.socket, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.socket.settimeout(TIMEOUT)
        environment = base_environment()
        environment.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE",
                            "DLTUNE_WARM_SERVER": "3"})
        environment.update(extra or {})
        log = append_fd(self.log)
        self.pid = spawn(["/bin/sh", "-c", f"cd {shlex.quote(str(cwd))} && exec {command}"], environment,
                         {1: log, 2: log, 3: theirs.fileno()})
        os.close(log)
        theirs.close()
        self.status = None

    def send(self, message, fds):
        socket.send_fds(self.socket, [json.dumps(message).encode()], fds)

    def reply(self):
        return json.loads(self.socket.recv(1 << 16))

    def start(self, trial, environment, cwd, command=None):
        """Asks for the trial; returns the server's reply and when the request was sent."""
        fds = trial.descriptors()
        sent = time.monotonic()
        self.send({"argv": ["/bin/sh", "-c", "exec " + (command or self.command)],
                   "env": [f"{name}={value}" for name, value in environment.items()], "cwd": str(cwd),
                   "parent": os.getpid()}, fds)
        for fd in fds[:2]:
            os.close(fd)
        trial.report.close_write_end()  # the worker keeps the read end only
        return self.reply(), sent

    def run(self, trial, environment, cwd, command=None):
        """Starts the trial warm and waits for it: its wait status."""
        reply, sent = self.start(trial, environment, cwd, command)
        assert "pid" in reply, reply
        status = wait(reply["pid"])
        arrival = trial.report.first_arrival()
        trial.start_seconds = arrival - sent if arrival is not None else None
        return status

    def alive(self):
        return self.status is None and os.waitpid(self.pid, os.WNOHANG) == (0, 0)

    def wait_exit(self, timeout=30):
        if self.status is None:
            self.status = wait(self.pid, timeout)
        return self.status

    def close(self):
        self.socket.close()  # the server sees end of file and exits
        return self.wait_exit()  # (once: its status when it exited before)


def comparable(texts):
    """Report lines to compare between two runs: every line as written, but a timing line's seconds (wall clock)."""
    return [text if json.loads(text)["type"] != "timing" else sorted(json.loads(text)["seconds"]) for text in texts]


class WarmTrialTest(unittest.TestCase):
    def setUp(self):
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="dltune-warm-"))
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        self.command = f"{shlex.quote(PYTHON)} -u {shlex.quote(str(PROGRAM))} --hidden 24"
        (self.root / "server").mkdir()

    def worker(self, command=None, extra=None):
        worker = FakeWorker(self.root, command or self.command, self.root / "server", extra)
        self.addCleanup(worker.close)
        return worker

    def server_log(self):
        return self.root.joinpath("warm-server.log").read_text()

    def assert_started_warm(self, trial, worker):
        first = trial.stdout().splitlines()[0]
        self.assertEqual(first, f"started warm: forked by program server {worker.pid} (its set-up's output: "
                                f"{self.root / 'warm-server.log'})")

    def test_a_warm_trial_reports_every_line_as_the_same_trial_run_cold(self):
        cold = Trial(self.root, "cold")
        self.assertEqual(exit_code(cold.run_cold(self.command, self.root, cold.environment())), 0, cold.stderr())

        worker = self.worker()
        warm = Trial(self.root, "warm")
        environment = warm.environment()
        self.assertEqual(exit_code(worker.run(warm, environment, self.root)), 0, warm.stderr() + self.server_log())

        self.assertEqual(len(warm.lines("train")), 60)
        self.assertEqual(comparable(warm.report.texts()), comparable(cold.report.texts()))  # every line, bit for bit
        self.assertEqual(warm.final(), cold.final())
        self.assert_started_warm(warm, worker)
        # The process as the trial sees it: its command line, directory, threads, generators and signals.
        self.assertEqual(warm.process_state(), cold.process_state())
        self.assertEqual(warm.process_state()["argv"], [str(PROGRAM), "--hidden", "24"])
        self.assertTrue(warm.process_state()["own_process_group"])
        self.assertEqual(warm.parent_death_signal(), signal.SIGKILL)  # it dies with its worker
        # Exactly the trial's environment: nothing of the server's (DLTUNE_WARM_SERVER, its thread counts).
        self.assertEqual(warm.environment_seen(), {**environment, "DLTUNE_WARM_START": str(worker.pid)})
        self.assertEqual(worker.close(), 0)  # end of file: the server exits, running nothing after dltune.run

    def test_b_a_crashed_warm_trial_leaves_the_server_serving(self):
        worker = self.worker()
        worker.send({"prepare": {"OMP_NUM_THREADS": "4"}}, [])  # read and not answered
        refused = Trial(self.root, "refused")
        fds = refused.descriptors()
        worker.send({"argv": ["/bin/sh", "-c", "exec " + self.command], "env": [], "cwd": str(self.root),
                     "parent": os.getpid()}, fds[:1])
        for fd in fds[:2]:
            os.close(fd)
        refused.report.close_write_end()
        self.assertEqual(worker.reply(), {"error": "a request carries three descriptors"})

        aborted = Trial(self.root, "aborted")
        status = worker.run(aborted, aborted.environment(extra={"WARM_MLP_CRASH": "abort"}), self.root)
        self.assertTrue(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGABRT, status)
        self.assertTrue(worker.alive())

        raised = Trial(self.root, "raised")
        status = worker.run(raised, raised.environment(extra={"WARM_MLP_CRASH": "raise"}), self.root)
        self.assertEqual(exit_code(status), 1)  # as a cold process: the traceback, then status 1
        self.assertIn("Traceback (most recent call last):", raised.stderr())
        self.assertIn("RuntimeError: an injected crash at step 3", raised.stderr())
        self.assertTrue(worker.alive())

        after = Trial(self.root, "after")
        self.assertEqual(exit_code(worker.run(after, after.environment(threads=2), self.root)), 0, after.stderr())
        self.assertEqual([line["step"] for line in after.lines("train")], list(range(1, 61)))
        self.assertEqual(after.process_state()["threads"], 2)  # its own thread count; the server runs with 1
        self.assertEqual(worker.close(), 0)

    def test_c_sigterm_stops_a_warm_trial_with_a_checkpoint_and_a_warm_resume_is_bit_identical(self):
        cold = Trial(self.root, "cold")
        self.assertEqual(exit_code(cold.run_cold(self.command, self.root, cold.environment())), 0, cold.stderr())

        worker = self.worker()
        stopped = Trial(self.root, "stopped")
        reply, _ = worker.start(stopped, stopped.environment(extra={"WARM_MLP_PAUSE_AT": "20"}), self.root)
        self.assertIn("pid", reply)
        self.assertTrue(stopped.report.wait_for(lambda line: line["type"] == "train" and line["step"] == 20))
        os.killpg(reply["pid"], signal.SIGTERM)  # as the worker stops a trial: its process group
        self.assertEqual(exit_code(wait(reply["pid"])), 75, stopped.stderr())
        first = stopped.report.texts()
        self.assertEqual(json.loads(first[-1]), {"type": "end", "state": "stopped", "step": 20})
        self.assertTrue((stopped.dir / "checkpoints" / "step_00000020.pt").is_file())

        resumed = worker.run(stopped, stopped.environment(resuming=True, resume_max_step=20), self.root)
        self.assertEqual(exit_code(resumed), 0, stopped.stderr())
        series = [text for text in first + stopped.report.texts() if json.loads(text)["type"] == "train"]
        self.assertEqual(series, [text for text in cold.report.texts() if json.loads(text)["type"] == "train"])
        self.assertEqual([json.loads(text)["step"] for text in stopped.report.texts()
                          if json.loads(text)["type"] == "start"], [20])
        self.assertEqual(stopped.final(), cold.final())

    def changed_between_trials(self, change, extra=None):
        """Serves a trial of a copy of the program, applies `change` to the copy, and asks for another."""
        program_dir = self.root / "program"
        program_dir.mkdir()
        shutil.copy(PROGRAM, program_dir)
        shutil.copy(HELPER, program_dir)
        command = f"{shlex.quote(PYTHON)} {shlex.quote(str(program_dir / PROGRAM.name))}"
        worker = self.worker(command, extra)
        first = Trial(self.root, "first", steps=6)
        self.assertEqual(exit_code(worker.run(first, first.environment(extra=extra), self.root)), 0, first.stderr())

        change(program_dir)
        second = Trial(self.root, "second", steps=6)
        reply, _ = worker.start(second, second.environment(extra=extra), self.root)
        self.assertEqual(exit_code(worker.wait_exit()), 0)  # it answered stale and exited
        self.assertEqual(second.report.texts(), [])  # no trial ran, from the old code or any
        self.assertEqual(second.stdout(), "")
        return reply

    def test_d_a_changed_program_file_makes_the_server_stale(self):
        def edit(program_dir):
            time.sleep(0.01)  # a later mtime on a file system with coarse timestamps; the size changes anyway
            with open(program_dir / PROGRAM.name, "a") as program:
                program.write("# changed\n")

        reply = self.changed_between_trials(edit)
        self.assertTrue(reply.get("stale"), reply)
        self.assertIn(f"{self.root / 'program' / PROGRAM.name} changed since the program server started",
                      reply["error"])
        self.assertIn("no warm trial: " + reply["error"], self.server_log())

    def test_d_a_changed_module_of_the_program_makes_the_server_stale(self):
        def edit(program_dir):
            time.sleep(0.01)
            (program_dir / HELPER.name).write_text("HIDDEN_DEFAULT = 64\n")

        reply = self.changed_between_trials(edit, extra={"WARM_MLP_HELPER": "1"})
        self.assertTrue(reply.get("stale"), reply)
        self.assertIn(f"{HELPER.name} changed since the program server started", reply["error"])

    def test_d_a_program_file_changed_during_the_set_up_makes_the_server_stale(self):
        program_dir = self.root / "program"
        program_dir.mkdir()
        shutil.copy(PROGRAM, program_dir)
        go = self.root / "go"
        extra = {"WARM_MLP_SETUP_WAIT": str(go)}
        worker = self.worker(f"{shlex.quote(PYTHON)} {shlex.quote(str(program_dir / PROGRAM.name))}", extra)
        time.sleep(0.1)  # the server has started (and read its program) when the file changes
        with open(program_dir / PROGRAM.name, "a") as program:
            program.write("# changed\n")
        go.touch()
        trial = Trial(self.root, "trial", steps=6)
        reply, _ = worker.start(trial, trial.environment(extra=extra), self.root)
        self.assertTrue(reply.get("stale"), reply)
        self.assertIn("changed after the program server started (during its set-up)", reply["error"])
        self.assertEqual(exit_code(worker.wait_exit()), 0)
        self.assertEqual(trial.report.texts(), [])

    def test_e_the_warm_line_is_written_only_when_offered(self):
        offered = Trial(self.root, "offered", steps=6)
        environment = offered.environment(extra={"DLTUNE_WARM_OFFER": "1"})
        self.assertEqual(exit_code(offered.run_cold(self.command, self.root, environment)), 0, offered.stderr())
        texts = offered.report.texts()
        self.assertEqual(json.loads(texts[0]), {"type": "warm", "program": str(PROGRAM)})  # before any other line
        self.assertEqual([json.loads(text)["type"] for text in texts[1:]].count("warm"), 0)
        self.assertEqual(len(offered.lines("train")), 6)

        plain = Trial(self.root, "plain", steps=6)
        self.assertEqual(exit_code(plain.run_cold(self.command, self.root, plain.environment())), 0, plain.stderr())
        self.assertNotIn("warm", [line["type"] for line in plain.lines()])
        self.assertEqual(comparable(plain.report.texts()), comparable(texts[1:]))

        # A program that does not call dltune.run never answers; one whose set-up made the trial must not.
        other = Trial(self.root, "other", steps=6)
        command = f"{shlex.quote(PYTHON)} {shlex.quote(str(COLD_PROGRAM))}"
        self.assertEqual(exit_code(other.run_cold(command, self.root, environment)), 0, other.stderr())
        self.assertNotIn("warm", [line["type"] for line in other.lines()])
        early = Trial(self.root, "early", steps=6)
        early_environment = early.environment(extra={"DLTUNE_WARM_OFFER": "1", "WARM_MLP_TRIAL_IN_SETUP": "1"})
        self.assertEqual(exit_code(early.run_cold(self.command, self.root, early_environment)), 0, early.stderr())
        self.assertNotIn("warm", [line["type"] for line in early.lines()])
        self.assertIn("dltune: trials of this program start cold: its set-up made the trial (dltune.trial()) before "
                      "dltune.run", early.stderr())

        # Standalone, dltune.run runs one trial: reports on standard output.
        alone = self.root / "alone"
        alone.mkdir()
        out = append_fd(alone / "stdout.log")
        pid = spawn(["/bin/sh", "-c", f"cd {shlex.quote(str(alone))} && exec {self.command} --params "
                                      "'{\"learning_rate\": 0.2}'"], base_environment(), {1: out, 2: out})
        os.close(out)
        self.assertEqual(exit_code(wait(pid)), 0, (alone / "stdout.log").read_text())
        lines = [json.loads(line) for line in (alone / "stdout.log").read_text().splitlines() if line.startswith("{")]
        self.assertEqual([line["step"] for line in lines if line["type"] == "train"], list(range(1, 61)))
        self.assertEqual({line["learning_rate"] for line in lines if line["type"] == "train"}, {0.2})

    def test_f_start_up_time_of_a_warm_trial(self):
        cold = Trial(self.root, "cold", steps=6)
        environment = cold.environment(extra={"DLTUNE_WARM_OFFER": "1"})
        self.assertEqual(exit_code(cold.run_cold(self.command, self.root, environment)), 0, cold.stderr())
        worker = self.worker()
        warm_seconds = []
        for number in range(4):  # the first request waits for the server's set-up
            warm = Trial(self.root, f"warm_{number}", steps=6)
            status = worker.run(warm, warm.environment(extra={"DLTUNE_WARM_OFFER": "1"}), self.root)
            self.assertEqual(exit_code(status), 0, warm.stderr())
            self.assertEqual(json.loads(warm.report.texts()[0])["type"], "warm")
            warm_seconds.append(warm.start_seconds)
        print(f"\nstart-up to the first report line: cold (exec) {cold.start_seconds * 1000:.0f} ms; warm (request "
              f"sent) {warm_seconds[0] * 1000:.0f} ms with the server's start and set-up, then "
              f"{', '.join(f'{seconds * 1000:.1f}' for seconds in warm_seconds[1:])} ms", file=sys.stderr)
        self.assertLess(max(warm_seconds[1:]), cold.start_seconds)


class CommandLineTest(unittest.TestCase):
    """sys.argv of a warm trial from the worker's request, as Python gives it to a cold process."""

    script = _warm.Program("script", ["python3", "-u"], path="/work/train.py", executable=sys.executable)

    def command(self, command, program=None, cwd="/work"):
        return _warm.trial_command(["/bin/sh", "-c", command], cwd, program or self.script,
                                   os.environ.get("PATH"))

    def test_the_words_from_the_script_on(self):
        self.assertEqual(self.command("exec python3 -u train.py --lr 0.1 --name 'a b'"),
                         (["train.py", "--lr", "0.1", "--name", "a b"], {}))
        self.assertEqual(self.command("exec python3 -u /work/./train.py"), (["/work/./train.py"], {}))
        self.assertEqual(self.command("trap : TERM; SEED=3 env CUBLAS_WORKSPACE_CONFIG=:4096:8 python3 -u train.py"),
                         (["train.py"], {"SEED": "3", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}))
        self.assertEqual(self.command("exec ./train.py --x"), (["./train.py", "--x"], {}))  # its #! line

    def test_python_options(self):
        split = _warm.split_python_command
        self.assertEqual(split(["python3", "-X", "dev", "-Wignore", "-uB", "t.py", "-u"]),
                         (["python3", "-X", "dev", "-Wignore", "-uB"], "script", "t.py", ["-u"]))
        self.assertEqual(split(["python3", "-um", "pkg.mod", "a"]), (["python3", "-u"], "module", "pkg.mod", ["a"]))
        self.assertEqual(split(["python3", "-c", "print(1)", "a"]), (["python3"], "code", "print(1)", ["a"]))
        self.assertEqual(split(["python3", "-W", "error", "-"]), (["python3", "-W", "error"], None, None, []))

    def test_a_module_and_code(self):
        module = _warm.Program("module", ["python3"], modules={"pkg.train"}, argv0="/work/pkg/train.py",
                               executable=sys.executable)
        self.assertEqual(self.command("exec python3 -m pkg.train --lr 1", module),
                         (["/work/pkg/train.py", "--lr", "1"], {}))
        code = _warm.Program("code", ["python3"], code="import t", executable=sys.executable)
        self.assertEqual(self.command("exec python3 -c 'import t' 7", code), (["-c", "7"], {}))

    def test_another_program_is_stale_and_another_shape_unsupported(self):
        with self.assertRaisesRegex(_warm.Stale, "the trial runs other.py, not this server's program /work/train.py"):
            self.command("exec python3 -u other.py")
        with self.assertRaisesRegex(_warm.Unsupported, "not this server's interpreter"):
            self.command("exec python3 train.py")  # without -u: another interpreter state
        with self.assertRaisesRegex(_warm.Unsupported, "not this server's interpreter"):
            self.command("exec taskset -c 0 python3 -u train.py")
        for command in ("cd sub && python3 -u train.py", "python3 -u train.py > log", "python3 -u train.py | tee x",
                        "python3 -u train.py --home $HOME", "python3 -u ~/train.py"):
            with self.assertRaises(_warm.Unsupported, msg=command) as raised:
                self.command(command)
            self.assertNotIsInstance(raised.exception, _warm.Stale)


if __name__ == "__main__":
    unittest.main()
