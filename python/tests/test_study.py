"""dltune.study(): rows as dicts through `dltune export --format json`, and as pandas DataFrames through its CSV where
pandas is installed (a stand-in pandas here, so the test runs with the standard library alone)."""
import csv
import pathlib
import sys
import tempfile
import types
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import dltune  # noqa: E402  (the client under test, from the source tree)

TRIALS_CSV = ("trial,configuration,state,best_value,started_at,ended_at,learning_rate\n"
              "0,0,completed,0.25,2026-12-07T09:00:00.000Z,2026-12-07T09:01:00.000Z,0.1\n")
TRIALS_JSON = '[{"trial": 0, "state": "completed", "best_value": 0.25}]\n'


def fake_dltune(directory):
    """A `dltune` that prints the export a format asks for and records its arguments."""
    script = pathlib.Path(directory) / "dltune"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {directory}/calls
case "$*" in
  *"--format csv"*) printf '%s' '{TRIALS_CSV}' ;;
  *) printf '%s' '{TRIALS_JSON}' ;;
esac
""")
    script.chmod(0o755)
    return str(script)


class FakeFrame:
    def __init__(self, rows):
        self.columns = list(rows[0].keys())
        self.data = {column: [row[column] for row in rows] for column in self.columns}

    def __getitem__(self, column):
        return self.data[column]

    def __setitem__(self, column, values):
        self.data[column] = values


def fake_pandas():
    module = types.ModuleType("pandas")
    module.read_csv = lambda buffer: FakeFrame(list(csv.DictReader(buffer)))
    module.to_datetime = lambda values, utc: [("utc" if utc else "local", value) for value in values]
    return module


class StudyTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="dltune-study-")
        self.executable = fake_dltune(self.dir.name)
        self.saved = sys.modules.get("pandas")

    def tearDown(self):
        if self.saved is None:
            sys.modules.pop("pandas", None)
        else:
            sys.modules["pandas"] = self.saved
        self.dir.cleanup()

    def calls(self):
        return (pathlib.Path(self.dir.name) / "calls").read_text().splitlines()

    def test_trials_are_dicts_from_the_json_export(self):
        trials = dltune.study("quick", storage="sqlite:///x.db", executable=self.executable).trials()
        self.assertEqual(trials, [{"trial": 0, "state": "completed", "best_value": 0.25}])
        self.assertEqual(self.calls(), ["export quick --format json --what trials --storage sqlite:///x.db"])

    def test_trials_frame_reads_the_csv_export_with_pandas_in_its_column_order(self):
        sys.modules["pandas"] = fake_pandas()
        frame = dltune.study("quick", executable=self.executable).trials_frame()
        self.assertEqual(self.calls(), ["export quick --format csv --what trials"])
        self.assertEqual(frame.columns,
                         ["trial", "configuration", "state", "best_value", "started_at", "ended_at", "learning_rate"])
        self.assertEqual(frame["learning_rate"], ["0.1"])
        self.assertEqual(frame["started_at"], [("utc", "2026-12-07T09:00:00.000Z")])
        dltune.study("quick", executable=self.executable).measurements_frame()
        self.assertEqual(self.calls()[-1], "export quick --format csv --what measurements")

    def test_without_pandas_a_frame_says_what_it_needs_and_the_dicts_still_work(self):
        sys.modules["pandas"] = None  # import pandas raises ImportError
        study = dltune.study("quick", executable=self.executable)
        with self.assertRaisesRegex(ImportError, r"trials_frame\(\) needs pandas .*trials\(\) gives the same rows"):
            study.trials_frame()
        self.assertEqual(len(study.trials()), 1)


if __name__ == "__main__":
    unittest.main()
