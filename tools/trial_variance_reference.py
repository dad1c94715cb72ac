#!/usr/bin/python3
"""Trial variance of a study with replicas, computed independently of the C++ code (src/analyze/trial_variance.cc),
from what `dltune export` writes.

Run with the Debian interpreter (numpy 1.24, scipy 1.10):
    dltune export STUDY --format json -o trials.json
    /usr/bin/python3 tools/trial_variance_reference.py trials.json [--maximize]

It prints JSON: for each configuration (grouped by the exported `configuration` column) the mean, the sample standard
deviation (numpy, ddof=1) and the 95% confidence interval of the mean (scipy.stats.t.interval) of its completed
replicas' best_value; the run-to-run standard deviation pooled over configurations; and, for every two
configurations, the paired differences of replicas with the same replica number (the same seed), oriented so that a
positive difference favours the configuration with the better mean, with their mean and 95% interval. tests/
procedures_test.cc compares these with dltune's own analysis.

scipy's t quantiles (cephes) agree with exact values to about 1e-9 relative, so the intervals are compared with that
tolerance; means and standard deviations to 1e-12.
"""
import argparse
import itertools
import json

import numpy as np
from scipy import stats


def interval(values):
    values = np.asarray(values, dtype=float)
    summary = {"n": int(len(values)), "mean": float(np.mean(values)) if len(values) else 0.0}
    if len(values) >= 2:
        summary["sd"] = float(np.std(values, ddof=1))
        low, high = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
        summary["low"], summary["high"] = float(low), float(high)
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trials", help="dltune export STUDY --format json")
    parser.add_argument("--maximize", action="store_true", help="the objective is maximized")
    args = parser.parse_args()
    with open(args.trials) as f:
        trials = json.load(f)
    completed = [t for t in trials if t["state"] == "completed" and t["best_value"] is not None]
    configurations = {}
    for t in completed:
        configurations.setdefault(t["configuration"], {})[t["replica"]] = t["best_value"]

    out = {"configurations": {}, "comparisons": []}
    squares, dof = 0.0, 0
    for configuration, by_replica in sorted(configurations.items()):
        summary = interval([by_replica[r] for r in sorted(by_replica)])
        out["configurations"][str(configuration)] = summary
        if "sd" in summary:
            squares += (summary["n"] - 1) * summary["sd"] ** 2
            dof += summary["n"] - 1
    if dof:
        out["pooled_sd"] = float(np.sqrt(squares / dof))

    def better_first(a, b):
        ma, mb = out["configurations"][str(a)]["mean"], out["configurations"][str(b)]["mean"]
        a_better = ma > mb if args.maximize else ma < mb
        if ma == mb:
            a_better = a < b
        return (a, b) if a_better else (b, a)

    for a, b in itertools.combinations(sorted(configurations), 2):
        better, other = better_first(a, b)
        shared = sorted(set(configurations[better]) & set(configurations[other]))
        sign = -1.0 if args.maximize else 1.0
        advantages = [sign * (configurations[other][r] - configurations[better][r]) for r in shared]
        out["comparisons"].append({"better": better, "other": other, "advantage": interval(advantages)})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
