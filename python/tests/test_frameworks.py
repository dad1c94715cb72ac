"""The Lightning and Hugging Face callbacks, each driving a short study under the real `dltune` command. Skipped,
with the reason printed, where the framework is not installed (Debian has neither; the GPU machine of
../shared/device/README.md has both): run with DLTUNE_TEST_PYTHON set to the interpreter that has them."""
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import dltune  # noqa: E402

PYTHON = os.environ.get("DLTUNE_TEST_PYTHON", "/usr/bin/python3")
DLTUNE = os.environ.get("DLTUNE_EXECUTABLE")


def importable(interpreter, *modules):
    """Whether `interpreter` imports one of `modules` (the trial runs in it, not in this process)."""
    for module in modules:
        done = subprocess.run([interpreter, "-c", f"import {module}"], capture_output=True, check=False)
        if done.returncode == 0:
            return True
    return False


class FrameworkStudyTest(unittest.TestCase):
    def run_study(self, name, program):
        root = pathlib.Path(tempfile.mkdtemp(prefix=f"dltune-{name}-"))
        storage = str(root / "store.db")
        (root / "study.yaml").write_text(f"""name: {name}
command: {PYTHON} {HERE / 'programs' / program}
run_dir: {root / 'runs'}
max_train_steps: 60
trials: 2
training: {{eval_every_steps: 20, threads: 1}}
space:
  learning_rate: {{min: 0.01, max: 0.3, scale: log}}
""")
        done = subprocess.run([DLTUNE, "run", "study.yaml", "--no-report", "--storage", storage], cwd=root,
                              capture_output=True, text=True, timeout=900, check=False)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        trials = dltune.study(name, storage=storage, executable=DLTUNE).trials()
        self.assertEqual({trial["state"] for trial in trials}, {"completed"})
        rows = dltune.study(name, storage=storage, executable=DLTUNE).measurements()
        self.assertEqual(sorted({row["step"] for row in rows if row["split"] == "valid"}), [20, 40, 60])

    @unittest.skipUnless(DLTUNE, "DLTUNE_EXECUTABLE is not set: the tests run from CTest, which sets it")
    def test_lightning_callback_drives_a_study(self):
        if not importable(PYTHON, "lightning", "pytorch_lightning"):
            self.skipTest(f"{PYTHON} has no Lightning (set DLTUNE_TEST_PYTHON to one that has)")
        self.run_study("lightning_client", "lightning_trial.py")

    @unittest.skipUnless(DLTUNE, "DLTUNE_EXECUTABLE is not set: the tests run from CTest, which sets it")
    def test_huggingface_callback_drives_a_study(self):
        if not importable(PYTHON, "transformers"):
            self.skipTest(f"{PYTHON} has no transformers (set DLTUNE_TEST_PYTHON to one that has)")
        self.run_study("huggingface_client", "huggingface_trial.py")


if __name__ == "__main__":
    unittest.main()
