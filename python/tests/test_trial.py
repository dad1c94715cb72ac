"""dltune.Trial in this process, without a subprocess: a fake dltune (the DLTUNE_* variables, trial.json, a report
file) and the report lines the trial writes, for the divergence rule, the evaluation schedule, the read-only settings,
the deprecated names and the integrations' use of the public API alone. Standard library only: runs in a second."""
import ast
import atexit
import json
import math
import os
import pathlib
import platform
import shutil
import signal
import sys
import tempfile
import types
import unittest
import warnings
from unittest import mock

HERE = pathlib.Path(__file__).resolve().parent
CLIENT = HERE.parent
sys.path.insert(0, str(CLIENT))
import dltune  # noqa: E402  (the client under test, from the source tree)
from dltune import _channel, _trial  # noqa: E402
sys.path.insert(0, str(HERE / "programs"))
from device_loss import DeviceLoss  # noqa: E402

SETTINGS = ["managed", "description", "params", "number", "seed", "max_train_steps", "training", "eval_every",
            "eval_schedule", "log_every", "divergence_factor", "objective", "objective_split", "objective_metric",
            "minimize", "checkpoint_owner", "gpus", "dir", "resuming", "resume_max_step", "rank", "local_rank",
            "world_size", "is_main", "evaluating", "restored", "stop_requested", "divergence", "first_loss",
            "last_saved_step"]


class TrialTestCase(unittest.TestCase):
    """Makes trials as dltune starts them, each with its own directory and report file, and undoes what a trial does
    to the process (its SIGTERM and SIGINT handlers, its exit handler, its open report file)."""

    def setUp(self):
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="dltune-trial-"))
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        handlers = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
        self.addCleanup(lambda: [signal.signal(number, handler) for number, handler in handlers.items()])
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self.report = self.root / "report.jsonl"

    def make(self, steps=12, training=None, params=None, environment=None, description=None, **options):
        """A trial under dltune: `environment` adds to (or, with None values, takes from) the DLTUNE_* variables."""
        params = {"learning_rate": 0.1, "batch_size": 32} if params is None else params
        described = {"protocol": 1, "study": "unit", "number": 4, "seed": 17, "max_train_steps": steps,
                     "objective": {"metric": "valid/error_rate", "direction": "minimize"},
                     "checkpoint_owner": {"study": "unit", "trial": 4, "seed": 17}, "params": params,
                     "gpus": [{"uuid": "GPU-1", "name": "fake", "index": 0, "memory_total_bytes": 1}],
                     "training": {"eval_every_steps": 6, "divergence_factor": 100, **(training or {})}}
        described.update(description or {})
        (self.root / "trial.json").write_text(json.dumps(described))
        (self.root / "params.json").write_text(json.dumps(params))
        variables = {"DLTUNE_PROTOCOL": "1", "DLTUNE_REPORT": str(self.report),
                     "DLTUNE_PARAMS": str(self.root / "params.json"), "DLTUNE_TRIAL": str(self.root / "trial.json"),
                     "DLTUNE_TRIAL_DIR": str(self.root / "trial"), "DLTUNE_RESUMING": "0",
                     "DLTUNE_TRIAL_NUMBER": "4", "DLTUNE_SEED": "17", "DLTUNE_MAX_TRAIN_STEPS": str(steps)}
        variables.update(environment or {})
        return self.make_in({name: value for name, value in variables.items() if value is not None}, **options)

    def make_in(self, variables, **options):
        options.setdefault("argv", [])
        options.setdefault("flush_seconds", 3600.0)  # batches are written at the evaluations and flushes alone
        with mock.patch.dict(os.environ, variables, clear=True):
            trial = dltune.Trial(**options)
        self.addCleanup(self.dispose, trial)
        return trial

    @staticmethod
    def dispose(trial):
        atexit.unregister(trial._flush_at_exit)
        if trial._channel is not None:
            trial._channel.close()

    def lines(self, kind=None):
        if not self.report.exists():
            return []
        lines = [json.loads(line) for line in self.report.read_text().splitlines()]
        # The runtime line (the first one written) is left out unless asked for: the tests look at the others.
        return [line for line in lines if (kind is None and line["type"] != "runtime") or line["type"] == kind]

    def assertEnds(self, status, call, *args, **kwargs):
        with self.assertRaises(SystemExit) as ended:
            call(*args, **kwargs)
        self.assertEqual(ended.exception.code, status)


class SettingsTest(TrialTestCase):
    def test_the_settings_come_from_the_environment_and_trial_json(self):
        trial = self.make(steps=40, training={"eval_every_steps": 8, "log_every_steps": 2, "eval_schedule": "dense:3",
                                              "divergence_factor": 10, "threads": 1},
                          environment={"DLTUNE_RESUMING": "1", "DLTUNE_RESUME_MAX_STEP": "24", "RANK": "0",
                                       "LOCAL_RANK": "0", "WORLD_SIZE": "1"})
        self.assertTrue(trial.managed)
        self.assertEqual(trial.params, {"learning_rate": 0.1, "batch_size": 32})
        self.assertEqual((trial.number, trial.seed, trial.max_train_steps), (4, 17, 40))
        self.assertEqual((trial.eval_every, trial.eval_schedule, trial.log_every), (8, "dense:3", 2))
        self.assertEqual(trial.divergence_factor, 10.0)
        self.assertEqual(trial.training["threads"], 1)
        self.assertEqual((trial.objective, trial.objective_split, trial.objective_metric, trial.minimize),
                         ("valid/error_rate", "valid", "error_rate", True))
        self.assertEqual(trial.checkpoint_owner, {"study": "unit", "trial": 4, "seed": 17})
        self.assertEqual([gpu["uuid"] for gpu in trial.gpus], ["GPU-1"])
        self.assertEqual(trial.dir, self.root / "trial")
        self.assertTrue(trial.dir.is_dir())
        self.assertEqual((trial.resuming, trial.resume_max_step), (True, 24))
        self.assertEqual((trial.rank, trial.local_rank, trial.world_size, trial.is_main), (0, 0, 1, True))
        self.assertIsNone(trial.evaluating)
        self.assertEqual(trial.restored, {})
        self.assertEqual(trial.description["study"], "unit")
        self.assertEqual((trial.stop_requested, trial.divergence, trial.first_loss, trial.last_saved_step),
                         (False, None, None, None))

    def test_the_defaults_of_a_study_that_sets_little(self):
        objective = {"metric": "valid/accuracy", "direction": "maximize"}
        trial = self.make(steps=50, description={"training": {}, "objective": objective})
        self.assertEqual((trial.eval_every, trial.eval_schedule, trial.log_every, trial.divergence_factor),
                         (5, "every", 5, 100.0))
        self.assertEqual((trial.objective_metric, trial.minimize), ("accuracy", False))
        self.assertIsNone(trial.resume_max_step)

    def test_every_setting_is_read_only(self):
        trial = self.make()
        for name in SETTINGS:
            with self.subTest(name), self.assertRaises(AttributeError):
                setattr(trial, name, getattr(trial, name))

    def test_the_mappings_it_gives_are_copies(self):
        trial = self.make()
        trial.params["learning_rate"] = 9.0
        trial.training["eval_every_steps"] = 1
        trial.gpus.clear()
        trial.gpus[0]["uuid"] = "GPU-2"
        trial.checkpoint_owner["trial"] = 5
        trial.restored["position"] = 3
        trial.description["training"]["eval_every_steps"] = 2
        self.assertEqual(trial.params["learning_rate"], 0.1)
        self.assertEqual(trial.training["eval_every_steps"], 6)
        self.assertEqual(trial.gpus[0]["uuid"], "GPU-1")
        self.assertEqual(trial.checkpoint_owner["trial"], 4)
        self.assertEqual(trial.restored, {})
        self.assertEqual(trial.description["training"]["eval_every_steps"], 6)

    def test_an_evaluate_command_is_told_its_checkpoint_and_split(self):
        trial = self.make(environment={"DLTUNE_CHECKPOINT": "/runs/step_00000030.pt", "DLTUNE_SPLIT": "test"})
        self.assertEqual((trial.evaluating.checkpoint, trial.evaluating.split),
                         (pathlib.Path("/runs/step_00000030.pt"), "test"))
        with self.assertRaises(AttributeError):
            trial.evaluating.split = "valid"

    def test_standalone_the_params_come_from_the_command_line_over_the_defaults(self):
        argv = ["train.py", "--lr-schedule", "cosine", "--params", '{"learning_rate": 0.2}', "--hidden", "8"]
        trial = self.make_in({"DLTUNE_TRIAL_DIR": str(self.root / "alone")}, argv=argv,
                             defaults={"learning_rate": 0.05, "batch_size": 64}, max_train_steps=30)
        self.assertFalse(trial.managed)
        self.assertEqual(trial.params, {"learning_rate": 0.2, "batch_size": 64})
        self.assertEqual(argv, ["train.py", "--lr-schedule", "cosine", "--hidden", "8"])  # --params taken out
        self.assertEqual((trial.max_train_steps, trial.seed, trial.number, trial.eval_every), (30, 0, None, 3))

    def test_standalone_without_a_step_budget_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "no step budget: pass max_train_steps="):
            self.make_in({"DLTUNE_TRIAL_DIR": str(self.root / "alone")})


class ScheduleTest(TrialTestCase):
    def evaluated(self, steps, **training):
        trial = self.make(steps=steps, training=training)
        return [step for step in range(1, steps + 1) if trial.evaluates_at(step)]

    def test_every_eval_every_steps_and_always_the_last(self):
        self.assertEqual(self.evaluated(20, eval_every_steps=5), [5, 10, 15, 20])
        self.assertEqual(self.evaluated(12, eval_every_steps=5), [5, 10, 12])

    def test_without_eval_every_steps_a_tenth_of_the_budget(self):
        self.assertEqual(self.evaluated(30, eval_every_steps=0), [3, 6, 9, 12, 15, 18, 21, 24, 27, 30])

    def test_dense_evaluates_the_first_steps_too(self):
        self.assertEqual(self.evaluated(20, eval_every_steps=10, eval_schedule="dense:3"), [1, 2, 3, 10, 20])

    def test_log_spaces_the_evaluations_on_a_log_scale(self):
        # log:4 over 1000 steps: round(1000^(i/3)) = 1, 10, 100, 1000.
        self.assertEqual(self.evaluated(1000, eval_schedule="log:4"), [1, 10, 100, 1000])


DIVERGENCE_CASES = CLIENT.parent / "src" / "train" / "testdata" / "divergence_cases.json"


class DivergenceRuleTest(unittest.TestCase):
    """The client's divergence rule is the built-in trainer's: the cases its C++ test reads (training_rules_test.cc)
    give the same verdicts, word for word."""

    def test_the_shared_cases(self):
        cases = json.loads(DIVERGENCE_CASES.read_text())["cases"]
        self.assertGreaterEqual(len(cases), 10)
        for case in cases:
            with self.subTest(case["name"]):
                loss = float(case["loss"])  # "nan", "-nan", "inf" and "-inf" as float() reads them
                first = loss if case["first_loss"] is None else float(case["first_loss"])
                self.assertEqual(_trial.divergence_reason(first, loss, case["step"], float(case["factor"])),
                                 case["diverged"])


class DivergenceTest(TrialTestCase):
    def test_a_trial_tests_its_losses_with_the_shared_rule(self):
        # The shared cases through the trial's own test: its study's factor, its first loss (resumed, or this one).
        for case in json.loads(DIVERGENCE_CASES.read_text())["cases"]:
            with self.subTest(case["name"]):
                trial = self.make(training={"divergence_factor": case["factor"]})
                if case["first_loss"] is not None:
                    trial.set_resumed_state({}, first_loss=float(case["first_loss"]))
                self.assertEqual(trial._check_divergence(case["step"], float(case["loss"])),
                                 case["diverged"] is not None)
                self.assertEqual(trial.divergence, case["diverged"])

    def test_a_loss_above_the_factor_times_the_first_ends_the_trial_at_its_report(self):
        trial = self.make()
        trial.report(1, loss=2.0)
        trial.report(2, loss=200.0)  # 100 times: not above
        self.assertEnds(0, trial.report, 3, loss=200.5)
        self.assertEqual([line["step"] for line in self.lines("train")], [1, 2, 3])
        self.assertEqual(self.lines("end"), [{"type": "end", "state": "infeasible", "reason":
                                              "diverged: training loss 200.5 at step 3 is more than 100x the "
                                              "initial loss 2"}])

    def test_the_factor_is_the_studys_divergence_factor(self):
        trial = self.make(training={"divergence_factor": 2.5})
        trial.report(1, loss=4.0)
        trial.report(2, loss=10.0)
        self.assertEnds(0, trial.report, 3, loss=10.5)
        [end] = self.lines("end")
        self.assertEqual(end["reason"], "diverged: training loss 10.5 at step 3 is more than 2.5x the initial loss 4")

    def test_a_first_loss_of_zero_is_floored_at_1e_minus_12(self):
        trial = self.make()
        trial.report(1, loss=0.0)
        trial.report(2, loss=1e-11)
        self.assertEnds(0, trial.report, 3, loss=0.5)
        self.assertEqual(self.lines("end")[0]["reason"],
                         "diverged: training loss 0.5 at step 3 is more than 100x the initial loss 0")

    def test_a_loss_that_is_not_finite_diverges(self):
        for value, text in ((math.nan, "nan"), (math.inf, "inf")):
            with self.subTest(text):
                self.report.unlink(missing_ok=True)
                trial = self.make()
                trial.report(1, loss=1.0)
                self.assertEnds(0, trial.report, 2, loss=value)
                self.assertEqual(self.lines("end")[0]["reason"], f"diverged: training loss is {text} at step 2")
                self.assertEqual(self.lines("train")[-1]["step"], 2)

    def test_a_loss_on_a_device_is_tested_when_its_batch_is_written(self):
        trial = self.make()
        for step, loss in enumerate([1.0, 1.0, 1000.0, 1.0], start=1):
            trial.report(step, loss=DeviceLoss(loss))  # read at no report: the trial trains on
        self.assertEqual(self.lines(), [])
        self.assertEnds(0, trial.flush)
        self.assertEqual([line["step"] for line in self.lines("train")], [1, 2, 3])  # none after step 3
        self.assertEqual(self.lines("end")[0]["reason"],
                         "diverged: training loss 1000 at step 3 is more than 100x the initial loss 1")

    def test_with_several_ranks_nothing_after_the_step_that_diverged_is_recorded(self):
        # Rank 0 of two: the trial does not end on its own (the ranks end it together at an agreed should_stop).
        trial = self.make(environment={"RANK": "0", "WORLD_SIZE": "2"})
        trial.report(1, loss=1.0)
        trial.report(2, loss=500.0)
        self.assertEqual(trial.divergence,
                         "diverged: training loss 500 at step 2 is more than 100x the initial loss 1")
        trial.report(3, loss=1.0)
        trial.record_evaluation(3, "valid", error_rate=0.1)
        trial.record_checkpoint(3, "checkpoints/step_00000003.pt")
        self.assertEqual([line["type"] for line in self.lines()], ["train", "train"])
        self.assertEqual(trial.last_saved_step, 3)
        self.assertEnds(0, trial.stop, 3)  # stop ends a diverged trial as infeasible
        self.assertEqual(self.lines("end")[0]["state"], "infeasible")

    def test_a_non_finite_objective_makes_the_trial_infeasible(self):
        trial = self.make()
        trial.report(1, loss=1.0)
        self.assertEnds(0, trial.record_evaluation, 1, "valid", error_rate=math.nan, loss=0.5)
        [evaluation] = self.lines("eval")
        self.assertEqual(evaluation["metrics"], {"loss": 0.5})  # the non-finite metric left out
        self.assertEqual(self.lines("end")[0]["reason"], "valid/error_rate is nan at step 1")

    def test_the_first_loss_carries_over_a_resume(self):
        trial = self.make()
        trial.set_resumed_state({"position": 7}, first_loss=1.0)
        self.assertEqual((trial.restored, trial.first_loss), ({"position": 7}, 1.0))
        trial.report(7, loss=90.0)
        self.assertEnds(0, trial.report, 8, loss=150.0)
        self.assertEqual(self.lines("end")[0]["reason"],
                         "diverged: training loss 150 at step 8 is more than 100x the initial loss 1")


class RecordTest(TrialTestCase):
    def test_the_report_lines_of_a_short_trial(self):
        trial = self.make()
        trial.record_start(0)
        trial.record_start(0)  # once
        trial.report(1, loss=0.5, learning_rate=0.1, grad_norm=math.inf, clipped=True)
        trial.record_evaluation(1, "valid", examples=100, error_rate=0.25, loss=0.4)
        trial.record_checkpoint(1, "checkpoints/step_00000001.pt", checksum="sha256:" + "0" * 64)
        trial.add_seconds("checkpoint", 0.5)
        self.assertEnds(75, trial.stop, 1)  # saved there already: nothing registered to save anyway
        self.assertEqual(self.lines(), [
            {"type": "start", "step": 0},
            {"type": "train", "step": 1, "loss": 0.5, "learning_rate": 0.1, "clipped": True},
            {"type": "eval", "step": 1, "split": "valid", "metrics": {"error_rate": 0.25, "loss": 0.4},
             "examples": 100},
            {"type": "checkpoint", "step": 1, "path": "checkpoints/step_00000001.pt", "objective": 0.25,
             "checksum": "sha256:" + "0" * 64},
            {"type": "timing", "seconds": {"checkpoint": 0.5}},
            {"type": "end", "state": "stopped", "step": 1}])
        self.assertEqual(trial.last_saved_step, 1)
        self.assertEqual(self.lines("runtime"), [{"type": "runtime", "runtime": _channel.runtime_versions()}])
        self.assertEqual(self.lines("runtime")[0]["runtime"]["python"], platform.python_version())
        self.assertEqual(self.report.read_text().splitlines()[0], json.dumps(self.lines("runtime")[0],
                                                                             separators=(",", ":")))

    def test_an_evaluation_needs_a_metric(self):
        trial = self.make()
        with self.assertRaisesRegex(ValueError, r"trial.record_evaluation\(\): give at least one metric"):
            trial.record_evaluation(1, "valid")

    def test_stop_saves_with_the_registered_saver_unless_saved_at_that_step(self):
        trial = self.make()
        saved = []
        trial.register_saver(lambda step, extra: saved.append((step, extra)))
        trial.record_checkpoint(6, "checkpoints/step_00000006.pt")
        with self.assertRaises(SystemExit):
            trial.stop(6, epoch=1)
        self.assertEqual(saved, [])
        self.report.unlink()
        trial = self.make()
        trial.register_saver(lambda step, extra: saved.append((step, extra)))
        self.assertEnds(75, trial.stop, 7, epoch=1)
        self.assertEqual(saved, [(7, {"epoch": 1})])
        self.assertEqual(self.lines("end"), [{"type": "end", "state": "stopped", "step": 7}])

    def test_sigterm_asks_the_trial_to_stop_and_a_second_one_gives_up(self):
        trial = self.make()  # the process has SIGTERM's default action (setUp): the trial handles it
        self.assertFalse(trial.should_stop())
        signal.raise_signal(signal.SIGTERM)
        self.assertEqual((trial.stop_requested, trial.should_stop()), (True, True))
        with self.assertRaises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGTERM)

    def test_a_program_that_handles_sigterm_itself_asks_with_request_stop(self):
        signal.signal(signal.SIGTERM, lambda *_: None)
        trial = self.make()
        self.assertIs(signal.getsignal(signal.SIGTERM).__class__, types.FunctionType)  # the program's, left alone
        self.assertFalse(trial.should_stop())
        trial.request_stop()
        self.assertEqual((trial.stop_requested, trial.should_stop()), (True, True))

    def test_infeasible_ends_the_trial_with_its_reason(self):
        trial = self.make()
        self.assertEnds(0, trial.infeasible, "batch_size 4096 does not fit")
        self.assertEqual(self.lines(),
                         [{"type": "end", "state": "infeasible", "reason": "batch_size 4096 does not fit"}])

    def test_rank_one_reports_nothing_and_notes_its_saves(self):
        trial = self.make(environment={"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"})
        self.assertFalse(trial.is_main)
        trial.record_start(0)
        trial.report(1, loss=1.0)
        trial.record_evaluation(1, "valid", error_rate=0.5)
        trial.record_checkpoint(1, "checkpoints/step_00000001.pt")
        self.assertEqual(self.lines(), [])
        self.assertEqual(trial.last_saved_step, 1)


class DeprecatedNamesTest(TrialTestCase):
    def setUp(self):
        super().setUp()
        _trial._warned.clear()
        self.addCleanup(_trial._warned.clear)

    def test_the_old_names_warn_once_and_write_what_the_new_ones_write(self):
        calls = {"evaluate": (("record_evaluation", 6, "valid"), {"examples": 10, "error_rate": 0.5}),
                 "checkpoint": (("record_checkpoint", 6, "checkpoints/step_00000006.pt"), {"checksum": None}),
                 "started": (("record_start", 0), {})}
        for old, ((new, *args), kwargs) in calls.items():
            with self.subTest(old):
                self.report.unlink(missing_ok=True)
                getattr(self.make(), new)(*args, **kwargs)
                expected = self.lines()
                self.report.unlink()
                trial = self.make()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    getattr(trial, old)(*args, **kwargs)
                    getattr(trial, old)(*args, **kwargs)
                self.assertEqual([warning.category for warning in caught], [DeprecationWarning])  # once
                self.assertIn(f"trial.{old}() is deprecated", str(caught[0].message))
                self.assertIn(f"call trial.{new}()", str(caught[0].message))
                self.assertEqual(caught[0].filename, __file__)  # the caller's line
                self.assertEqual(self.lines()[:len(expected)], expected)


class IntegrationsTest(unittest.TestCase):
    """dltune.torch, dltune.lightning and dltune.huggingface use the trial's public API alone, and only members it has:
    read from their source, so the frameworks need not be installed."""

    def test_the_integrations_use_only_public_members_of_the_trial(self):
        public = {name for name in dir(dltune.Trial) if not name.startswith("_")}
        for module in ("torch", "lightning", "huggingface", "_checkpoints"):
            path = CLIENT / "dltune" / f"{module}.py"
            used = set()
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Attribute) and _is_the_trial(node.value):
                    used.add(node.attr)
            with self.subTest(module):
                self.assertTrue(used)
                self.assertEqual(sorted(used - public), [], f"{path} uses these members of the trial")

    def test_the_package_is_typed(self):
        self.assertTrue((CLIENT / "dltune" / "py.typed").is_file())


def _is_the_trial(node):
    """`trial` or `self.trial`."""
    if isinstance(node, ast.Name):
        return node.id == "trial"
    return isinstance(node, ast.Attribute) and node.attr == "trial"


if __name__ == "__main__":
    unittest.main()
