"""The client under the real `dltune` command ($DLTUNE_EXECUTABLE): a study of client programs runs, stops through a
launcher that exits 1, resumes, and is read back with dltune.study()."""
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import dltune  # noqa: E402  (the client under test, from the source tree)

PYTHON = os.environ.get("DLTUNE_TEST_PYTHON", "/usr/bin/python3")
DLTUNE = os.environ.get("DLTUNE_EXECUTABLE")
PROGRAM = HERE / "programs" / "mlp_trial.py"
LAUNCHER = HERE / "programs" / "exit_one_launcher.py"


def spec(name, command, run_dir, trials=3):
    return f"""name: {name}
command: {command}
run_dir: {run_dir}
max_train_steps: 60
objective: {{metric: valid/error_rate, direction: minimize}}
trials: {trials}
seed: 1
training:
  eval_every_steps: 6
  threads: 1
space:
  learning_rate: {{min: 0.01, max: 0.3, scale: log}}
  batch_size: 32
"""


@unittest.skipUnless(DLTUNE, "DLTUNE_EXECUTABLE is not set: the tests run from CTest, which sets it")
class WithDltuneTest(unittest.TestCase):
    def setUp(self):
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="dltune-client-run-"))
        self.storage = str(self.root / "store.db")
        # Under dltune the client is found without PYTHONPATH: dltune puts it on every trial's path.
        self.env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}

    def tearDown(self):
        subprocess.run(["rm", "-rf", str(self.root)], check=False)

    def dltune(self, *arguments):
        return subprocess.run([DLTUNE, *arguments, "--storage", self.storage], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=600, check=False)

    def test_a_study_of_client_programs_completes_and_reads_back_as_dicts(self):
        (self.root / "study.yaml").write_text(spec("client_study", f"{PYTHON} {PROGRAM}", self.root / "runs"))
        done = self.dltune("run", "study.yaml", "--no-report")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        trials = dltune.study("client_study", storage=self.storage, executable=DLTUNE).trials()
        self.assertEqual(len(trials), 3)
        self.assertEqual({trial["state"] for trial in trials}, {"completed"})
        measurements = dltune.study("client_study", storage=self.storage, executable=DLTUNE).measurements()
        self.assertTrue(any(row.get("split") == "valid" for row in measurements))

    def test_a_stop_through_a_launcher_that_exits_one_is_recorded_stopped_and_resumes(self):
        command = f"MLP_TRIAL_SIGTERM_AT=11 {PYTHON} {LAUNCHER} {PYTHON} {PROGRAM}"
        (self.root / "study.yaml").write_text(spec("launched", command, self.root / "runs", trials=1))
        first = self.dltune("run", "study.yaml", "--no-report")
        self.assertEqual(first.returncode, 75, first.stdout + first.stderr)  # stopped trials: resumable
        [trial] = dltune.study("launched", storage=self.storage, executable=DLTUNE).trials()
        self.assertEqual(trial["state"], "stopped")

        second = self.dltune("run", "study.yaml", "--no-report")
        self.assertEqual(second.returncode, 0, second.stdout + second.stderr)
        [trial] = dltune.study("launched", storage=self.storage, executable=DLTUNE).trials()
        self.assertEqual(trial["state"], "completed")
        rows = dltune.study("launched", storage=self.storage, executable=DLTUNE).measurements()
        train_steps = sorted(row["step"] for row in rows if row["split"] == "train_step" and row["metric"] == "loss")
        self.assertEqual(train_steps, list(range(1, 61)))

    def test_a_trial_whose_loss_diverges_is_recorded_infeasible_with_nothing_after_that_step(self):
        # Step 3's loss is 10^4 times the first; the first evaluation would be at step 6.
        command = f"MLP_TRIAL_EXPLODE_AT=3 MLP_TRIAL_FLUSH_SECONDS=3600 {PYTHON} {PROGRAM}"
        (self.root / "study.yaml").write_text(spec("diverging", command, self.root / "runs", trials=1))
        done = self.dltune("run", "study.yaml", "--no-report")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        [trial] = dltune.study("diverging", storage=self.storage, executable=DLTUNE).trials()
        self.assertEqual(trial["state"], "infeasible", trial)
        self.assertEqual((trial["best_step"], trial["best_value"]), (None, None))  # no objective
        self.assertRegex(trial["reason"], r"^diverged: training loss \S+ at step 3 is more than 100x the initial loss")
        rows = dltune.study("diverging", storage=self.storage, executable=DLTUNE).measurements()
        losses = [row for row in rows if row["split"] == "train_step" and row["metric"] == "loss"]
        self.assertEqual(sorted(row["step"] for row in losses), [1, 2, 3])
        self.assertEqual([row for row in rows if row["split"] == "valid"], [])  # no objective
        self.assertEqual(list((self.root / "runs").rglob("step_*.pt")), [])

    def test_a_missing_study_is_a_clear_error(self):
        with self.assertRaisesRegex(RuntimeError, "no_such_study"):
            dltune.study("no_such_study", storage=self.storage, executable=DLTUNE).trials()


if __name__ == "__main__":
    unittest.main()
