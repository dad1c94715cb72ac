"""Tests of the Python trial client (python/dltune) on the CPU, with Debian's python3-torch.

The protocol side is played here as dltune plays it (the DLTUNE_* variables, a report file); test_with_dltune.py runs
the same programs under the real `dltune` command.
"""
import json
import os
import pathlib
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import unittest
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
CLIENT = HERE.parent
PROGRAM = HERE / "programs" / "mlp_trial.py"
PYTHON = os.environ.get("DLTUNE_TEST_PYTHON", "/usr/bin/python3")


def read_lines(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def flip_a_tensor_byte(path):
    """Flips a high mantissa bit of the first value of the checkpoint's first tensor (torch.save's zip archive stores
    its records uncompressed): the file still loads, with one weight a quarter to a half off."""
    with zipfile.ZipFile(path) as archive:
        [record] = [info for info in archive.infolist() if info.filename.endswith("/data/0")]
        assert record.compress_type == zipfile.ZIP_STORED and record.file_size >= 4, record
    with open(path, "r+b") as file:
        file.seek(record.header_offset)
        header = file.read(30)
        assert header[:4] == b"PK\x03\x04", header
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        at = record.header_offset + 30 + name_length + extra_length + 2  # the third byte of a little-endian float
        file.seek(at)
        byte = file.read(1)[0]
        file.seek(at)
        file.write(bytes([byte ^ 0x40]))


class ProtocolHarness:
    """One trial directory, started as dltune starts a trial (docs/trial-protocol.md, "Starting a trial")."""

    def __init__(self, root, steps=60, eval_every=6, params=None, seed=3):
        self.dir = pathlib.Path(root) / "trial_0"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.report = pathlib.Path(root) / "report.jsonl"
        self.steps = steps
        params = params or {"learning_rate": 0.1, "batch_size": 32}
        (self.dir / "params.json").write_text(json.dumps(params))
        owner = {"study": "client_test", "study_uid": "0123456789ab", "trial": 0, "seed": seed, "params_sha256": "x"}
        description = {"protocol": 1, "study": "client_test", "number": 0, "seed": seed, "max_train_steps": steps,
                       "objective": {"metric": "valid/error_rate", "direction": "minimize"},
                       "checkpoint_owner": owner, "params": params,
                       "training": {"eval_every_steps": eval_every, "divergence_factor": 100}}
        (self.dir / "trial.json").write_text(json.dumps(description))
        self.seed = seed

    def environment(self, resuming=False, resume_max_step=None, extra=None):
        env = dict(os.environ)
        env.update({"DLTUNE_PROTOCOL": "1", "DLTUNE_REPORT": str(self.report),
                    "DLTUNE_PARAMS": str(self.dir / "params.json"), "DLTUNE_TRIAL": str(self.dir / "trial.json"),
                    "DLTUNE_TRIAL_DIR": str(self.dir), "DLTUNE_RESUMING": "1" if resuming else "0",
                    "DLTUNE_TRIAL_NUMBER": "0", "DLTUNE_SEED": str(self.seed),
                    "DLTUNE_MAX_TRAIN_STEPS": str(self.steps), "DLTUNE_TRIAL_TOKEN": "test-token",
                    "PYTHONPATH": str(CLIENT), "MLP_TRIAL_FINAL": str(self.dir / "final.sha256")})
        if resume_max_step is not None:
            env["DLTUNE_RESUME_MAX_STEP"] = str(resume_max_step)
        env.update(extra or {})
        return env

    def run(self, resuming=False, resume_max_step=None, extra=None, program=None, argv=()):
        command = [PYTHON, str(program or PROGRAM), *argv]
        return subprocess.run(command, env=self.environment(resuming, resume_max_step, extra), capture_output=True,
                              text=True, timeout=300, check=False)

    def lines(self, kind=None):
        # The runtime line is left out unless asked for: the tests look at the others.
        return [line for line in read_lines(self.report)
                if (kind is None and line["type"] != "runtime") or line["type"] == kind]

    def final(self):
        return (self.dir / "final.sha256").read_text()


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.TemporaryDirectory(prefix="dltune-client-")
        self.addCleanup(self.root.cleanup)

    def harness(self, name, **options):
        return ProtocolHarness(pathlib.Path(self.root.name) / name, **options)

    def test_a_trial_reports_every_step_and_checkpoints_at_each_evaluation(self):
        trial = self.harness("complete")
        done = trial.run()
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual([line["step"] for line in trial.lines("train")], list(range(1, 61)))
        self.assertEqual([line["step"] for line in trial.lines("eval")], list(range(6, 61, 6)))
        checkpoints = trial.lines("checkpoint")
        self.assertEqual([line["step"] for line in checkpoints], list(range(6, 61, 6)))
        for line in checkpoints:
            self.assertTrue((trial.dir / line["path"]).is_file())
            self.assertRegex(line["checksum"], r"^sha256:[0-9a-f]{64}$")
            self.assertIn("objective", line)
        self.assertEqual(trial.lines("start"), [{"type": "start", "step": 0}])
        self.assertEqual(trial.lines("end"), [])  # exit status 0 says completed

    def test_a_stopped_trial_resumes_with_no_gap_and_a_bit_identical_result(self):
        uninterrupted = self.harness("uninterrupted")
        self.assertEqual(uninterrupted.run().returncode, 0)

        stopped = self.harness("stopped")
        first = stopped.run(extra={"MLP_TRIAL_SIGTERM_AT": "23"})
        self.assertEqual(first.returncode, 75, first.stderr)
        self.assertEqual(stopped.lines("end"), [{"type": "end", "state": "stopped", "step": 23}])
        self.assertTrue((stopped.dir / "checkpoints" / "step_00000023.pt").is_file())
        second = stopped.run(resuming=True, resume_max_step=23)
        self.assertEqual(second.returncode, 0, second.stderr)

        starts = stopped.lines("start")
        self.assertEqual([line["step"] for line in starts], [0, 23])
        steps = [line["step"] for line in stopped.lines("train")]
        self.assertEqual(steps, list(range(1, 61)))  # no gap, no step twice
        losses = [line["loss"] for line in stopped.lines("train")]
        self.assertEqual(losses, [line["loss"] for line in uninterrupted.lines("train")])
        self.assertEqual(stopped.final(), uninterrupted.final())

    def test_a_damaged_newest_checkpoint_is_skipped_for_the_older_one_and_the_series_stays_exact(self):
        uninterrupted = self.harness("uninterrupted")
        self.assertEqual(uninterrupted.run().returncode, 0)

        damaged = self.harness("damaged")
        self.assertEqual(damaged.run(extra={"MLP_TRIAL_SIGTERM_AT": "23"}).returncode, 75)
        newest = damaged.dir / "checkpoints" / "step_00000023.pt"
        flip_a_tensor_byte(newest)
        resumed = damaged.run(resuming=True, resume_max_step=23)
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        self.assertRegex(resumed.stderr, rf"dltune: checkpoint {re.escape(str(newest))} is corrupt \(its SHA-256 "
                                         r"sha256:[0-9a-f]{64} is not the sha256:[0-9a-f]{64} recorded in "
                                         r"SHA256SUMS when it was saved\); falling back to an older checkpoint")
        self.assertEqual(damaged.lines("start")[-1], {"type": "start", "step": 18})
        after = [line for line in damaged.lines("train")][23:]  # the resumed run's lines
        expected = [line for line in uninterrupted.lines("train") if line["step"] > 18]
        self.assertEqual(after, expected)  # every loss bit for bit
        self.assertEqual(damaged.final(), uninterrupted.final())

    def test_a_checkpoint_without_a_recorded_checksum_is_loaded_unverified_with_a_notice(self):
        trial = self.harness("unrecorded")
        self.assertEqual(trial.run(extra={"MLP_TRIAL_SIGTERM_AT": "23"}).returncode, 75)
        (trial.dir / "checkpoints" / "SHA256SUMS").unlink()
        resumed = trial.run(resuming=True, resume_max_step=23)
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        self.assertEqual(trial.lines("start")[-1], {"type": "start", "step": 23})
        self.assertIn("step_00000023.pt has no SHA-256 recorded in SHA256SUMS: the file was not verified",
                      resumed.stderr)

    def test_resuming_never_uses_a_checkpoint_newer_than_dltune_recorded(self):
        trial = self.harness("resume_max")
        self.assertEqual(trial.run().returncode, 0)
        again = trial.run(resuming=True, resume_max_step=30)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(trial.lines("start")[-1], {"type": "start", "step": 30})

    def test_a_checkpoint_of_another_trial_is_never_loaded(self):
        trial = self.harness("owner")
        self.assertEqual(trial.run().returncode, 0)
        description = json.loads((trial.dir / "trial.json").read_text())
        description["checkpoint_owner"]["trial"] = 9
        (trial.dir / "trial.json").write_text(json.dumps(description))
        again = trial.run(resuming=True)
        self.assertEqual(again.returncode, 0)
        self.assertEqual(trial.lines("start")[-1], {"type": "start", "step": 0})
        self.assertIn("belongs to another trial", again.stderr)

    def test_a_diverging_loss_ends_the_trial_infeasible_with_its_reason(self):
        trial = self.harness("diverge", params={"learning_rate": 1.0e6, "batch_size": 32})
        done = trial.run()
        self.assertEqual(done.returncode, 0, done.stderr)
        end = trial.lines("end")
        self.assertEqual(len(end), 1)
        self.assertEqual(end[0]["state"], "infeasible")
        self.assertRegex(end[0]["reason"], r"loss .* at step \d+")

    def test_the_report_whose_loss_diverges_ends_the_trial_infeasible_at_that_step(self):
        # Step 8's loss is 10^4 times the first; written batches are an hour apart, so only the report can see it.
        trial = self.harness("explode")
        done = trial.run(extra={"MLP_TRIAL_EXPLODE_AT": "8", "MLP_TRIAL_FLUSH_SECONDS": "3600"})
        self.assertEqual(done.returncode, 0, done.stderr)
        train = trial.lines("train")
        self.assertEqual([line["step"] for line in train], list(range(1, 9)))
        self.assertEqual([line["step"] for line in trial.lines("eval")], [6])  # no objective after step 8
        self.assertEqual([line["step"] for line in trial.lines("checkpoint")], [6])
        self.assertEqual([path.name for path in (trial.dir / "checkpoints").glob("step_*.pt")], ["step_00000006.pt"])
        first, last = train[0]["loss"], train[-1]["loss"]
        reason = f"diverged: training loss {last:.4g} at step 8 is more than 100x the initial loss {first:.4g}"
        self.assertEqual(trial.lines("end"), [{"type": "end", "state": "infeasible", "reason": reason}])

    def series(self, name, losses, on_device=False):
        trial = self.harness(name, steps=12, eval_every=6)
        extra = {"SERIES_LOSSES": json.dumps(losses), "SERIES_ON_DEVICE": "1" if on_device else "0"}
        done = trial.run(program=HERE / "programs" / "series_trial.py", extra=extra)
        self.assertEqual(done.returncode, 0, done.stderr)
        steps_done = [int(step) for step in (trial.dir / "steps_done").read_text().split()]
        return trial, steps_done

    def test_a_nan_loss_ends_the_trial_at_its_report(self):
        trial, steps_done = self.series("nan", [2.0, 1.5, "nan", 1.0])
        self.assertEqual(steps_done, [1, 2, 3])
        self.assertEqual([line["step"] for line in trial.lines("train")], [1, 2, 3])
        self.assertEqual(trial.lines("eval"), [])
        self.assertEqual(trial.lines("end"), [{"type": "end", "state": "infeasible",
                                               "reason": "diverged: training loss is nan at step 3"}])

    def test_a_first_loss_of_zero_is_floored_at_1e_minus_12_as_the_built_in_trainer_does(self):
        trial, steps_done = self.series("zero_first", [0.0, 1e-11, 0.5])
        self.assertEqual(steps_done, [1, 2, 3])
        self.assertEqual([line["step"] for line in trial.lines("train")], [1, 2, 3])
        self.assertEqual(trial.lines("end"), [{"type": "end", "state": "infeasible", "reason":
                                               "diverged: training loss 0.5 at step 3 is more than 100x the "
                                               "initial loss 0"}])

    def test_a_loss_on_a_gpu_read_at_the_next_batch_records_nothing_after_the_step_that_diverged(self):
        # Read only when the batch is written (at step 6's evaluation): the trial trained on to step 6, but records
        # steps 1 to 5, and neither step 6's evaluation nor its checkpoint.
        trial, steps_done = self.series("device", [1.0, 1.0, 1.0, 1.0, 1000.0, 1.0], on_device=True)
        self.assertEqual(steps_done, list(range(1, 7)))
        self.assertEqual([line["step"] for line in trial.lines("train")], [1, 2, 3, 4, 5])
        self.assertEqual(trial.lines("eval"), [])
        self.assertEqual(trial.lines("checkpoint"), [])
        self.assertEqual(trial.lines("end"), [{"type": "end", "state": "infeasible", "reason":
                                               "diverged: training loss 1000 at step 5 is more than 100x the "
                                               "initial loss 1"}])

    def test_two_ranks_train_and_only_rank_zero_reports_and_saves(self):
        trial = self.harness("ranks")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        ranks = []
        for rank in range(2):
            extra = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                     "MASTER_PORT": str(port), "MLP_TRIAL_SIGTERM_AT": "17" if rank == 1 else "0"}
            ranks.append(subprocess.Popen([PYTHON, str(PROGRAM)], env=trial.environment(extra=extra),
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        results = [process.communicate(timeout=300) for process in ranks]
        # Rank 1 alone got SIGTERM at step 17; the ranks agree on the stop at the next agreement (every 10 checks).
        self.assertEqual([process.returncode for process in ranks], [75, 75], results)
        self.assertEqual([line["step"] for line in trial.lines("train")], list(range(1, 21)))
        self.assertEqual(len(trial.lines("start")), 1)
        self.assertEqual(trial.lines("end"), [{"type": "end", "state": "stopped", "step": 20}])
        self.assertTrue((trial.dir / "checkpoints" / "step_00000020.pt").is_file())

    def test_with_two_ranks_nothing_after_the_step_that_diverged_is_recorded(self):
        # Rank 0's loss diverges at step 13; the ranks agree at step 20 (every 10 checks) and end it infeasible.
        trial = self.harness("ranks_diverge")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        ranks = []
        for rank in range(2):
            extra = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                     "MASTER_PORT": str(port), "MLP_TRIAL_EXPLODE_AT": "13", "MLP_TRIAL_FLUSH_SECONDS": "3600"}
            ranks.append(subprocess.Popen([PYTHON, str(PROGRAM)], env=trial.environment(extra=extra),
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        results = [process.communicate(timeout=300) for process in ranks]
        self.assertEqual([process.returncode for process in ranks], [0, 0], results)
        self.assertEqual([line["step"] for line in trial.lines("train")], list(range(1, 14)))
        self.assertEqual([line["step"] for line in trial.lines("eval")], [6, 12])  # not 18
        self.assertEqual([line["step"] for line in trial.lines("checkpoint")], [6, 12])
        [end] = trial.lines("end")
        self.assertEqual(end["state"], "infeasible")
        self.assertRegex(end["reason"], r"^diverged: training loss \S+ at step 13 is more than 100x")

    def test_standalone_the_params_come_from_the_command_line_and_reports_go_to_stdout(self):
        env = {key: value for key, value in os.environ.items() if not key.startswith("DLTUNE_")}
        env.update({"PYTHONPATH": str(CLIENT), "DLTUNE_TRIAL_DIR": str(pathlib.Path(self.root.name) / "alone")})
        done = subprocess.run([PYTHON, str(PROGRAM), "--params", '{"learning_rate": 0.2}'], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        self.assertEqual(done.returncode, 0, done.stderr)
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        self.assertEqual([line["step"] for line in lines if line["type"] == "train"], list(range(1, 61)))
        self.assertEqual({line["learning_rate"] for line in lines if line["type"] == "train"}, {0.2})
        self.assertTrue((pathlib.Path(self.root.name) / "alone" / "checkpoints" / "step_00000060.pt").is_file())

    def test_a_stop_survives_a_launcher_that_closes_the_channel_and_exits_one(self):
        # The launcher runs the program with descriptors above 2 closed: the report channel /dev/fd/N of a real
        # trial is found again in the launcher through /proc.
        trial = self.harness("launcher")
        read_end, write_end = os.pipe()
        os.set_inheritable(write_end, True)
        env = trial.environment(extra={"DLTUNE_REPORT": f"/dev/fd/{write_end}", "MLP_TRIAL_SIGTERM_AT": "11"})
        launcher = subprocess.Popen([PYTHON, str(HERE / "programs" / "exit_one_launcher.py"), PYTHON, str(PROGRAM)],
                                    env=env, pass_fds=(write_end,), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(write_end)
        with os.fdopen(read_end) as channel:
            received = [json.loads(line) for line in channel]
        _, stderr = launcher.communicate(timeout=300)
        self.assertEqual(launcher.returncode, 1, stderr)
        self.assertEqual(received[-1], {"type": "end", "state": "stopped", "step": 11})
        self.assertEqual([line["step"] for line in received if line["type"] == "train"], list(range(1, 12)))

    def test_an_evaluate_command_loads_the_checkpoint_and_reports_one_split(self):
        trial = self.harness("evaluate")
        self.assertEqual(trial.run().returncode, 0)
        trial.report.unlink()
        done = trial.run(extra={"DLTUNE_CHECKPOINT": str(trial.dir / "checkpoints" / "step_00000030.pt"),
                                "DLTUNE_SPLIT": "test"})
        self.assertEqual(done.returncode, 0, done.stderr)
        [evaluation] = trial.lines()
        self.assertEqual((evaluation["type"], evaluation["step"], evaluation["split"]), ("eval", 30, "test"))


class PackagingTest(unittest.TestCase):
    def test_pip_installs_the_client_from_the_source_tree(self):
        with tempfile.TemporaryDirectory(prefix="dltune-pip-") as root:
            source = pathlib.Path(root) / "python"
            shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("tests", "__pycache__", "build"))
            subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", f"{root}/venv"], check=True)
            pip = subprocess.run([f"{root}/venv/bin/pip", "install", "--quiet", "--no-index", "--no-build-isolation",
                                  str(source)], capture_output=True, text=True, check=False)
            self.assertEqual(pip.returncode, 0, pip.stderr)
            where = subprocess.run([f"{root}/venv/bin/python", "-c", "import dltune; print(dltune.__file__)"],
                                   cwd=root, env={"PATH": os.environ["PATH"]}, capture_output=True, text=True,
                                   check=True)
            self.assertIn(f"{root}/venv/", where.stdout)
            self.assertTrue((pathlib.Path(where.stdout.strip()).parent / "py.typed").is_file())  # typed (PEP 561)


class ScheduleTest(unittest.TestCase):
    def test_the_evaluation_schedules_follow_the_built_in_trainer(self):
        sys.path.insert(0, str(CLIENT))
        from dltune._trial import _evaluates

        self.assertEqual([s for s in range(1, 21) if _evaluates("every", s, 5, 20)], [5, 10, 15, 20])
        self.assertEqual([s for s in range(1, 21) if _evaluates("dense:3", s, 10, 20)], [1, 2, 3, 10, 20])
        # log:4 over 1000 steps: round(1000^(i/3)) = 1, 10, 100, 1000.
        self.assertEqual([s for s in range(1, 1001) if _evaluates("log:4", s, 100, 1000)], [1, 10, 100, 1000])


RUN_PROGRAM = """import atexit, pathlib, sys
import dltune
atexit.register(lambda: pathlib.Path(sys.argv[1]).write_text("exit handlers ran"))
def train(trial):
    trial.report(1, loss=0.5)
    if sys.argv[2] == "raise":
        raise SystemExit(3)
    return "trained"
print("run returned", dltune.run(train, max_train_steps=1), flush=True)
"""


class RunTest(unittest.TestCase):
    """dltune.run: under dltune the process ends with its trial, as the interpreter would end it (exit handlers, output,
    status), without returning; standalone it returns what the trial returned."""

    def setUp(self):
        self.root = tempfile.TemporaryDirectory(prefix="dltune-run-")
        self.addCleanup(self.root.cleanup)
        self.program = pathlib.Path(self.root.name) / "program.py"
        self.program.write_text(RUN_PROGRAM)

    def test_under_dltune_the_process_ends_with_its_trial(self):
        trial = ProtocolHarness(pathlib.Path(self.root.name) / "managed", steps=1)
        marker = pathlib.Path(self.root.name) / "managed.marker"
        for how, status in (("return", 0), ("raise", 3)):
            done = trial.run(program=self.program, argv=(str(marker), how))
            self.assertEqual(done.returncode, status, done.stderr)
            self.assertNotIn("run returned", done.stdout)  # run did not return
            self.assertEqual(marker.read_text(), "exit handlers ran")
            self.assertEqual(trial.lines("train")[-1]["step"], 1)  # the trial's last lines were written
            marker.unlink()

    def test_standalone_run_returns_what_the_trial_returned(self):
        marker = pathlib.Path(self.root.name) / "alone.marker"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DLTUNE_")}
        env["PYTHONPATH"] = str(CLIENT)
        env["DLTUNE_TRIAL_DIR"] = str(pathlib.Path(self.root.name) / "alone")
        done = subprocess.run([PYTHON, str(self.program), str(marker), "return"], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("run returned trained", done.stdout)
        self.assertEqual(marker.read_text(), "exit handlers ran")


if __name__ == "__main__":
    unittest.main()
