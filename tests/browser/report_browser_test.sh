#!/usr/bin/env bash
# The HTML report as a person sees it: `dltune run` on a small study whose description, params and trial reasons
# hold hostile strings (its trials are tests/browser/fake_trial.py, a few milliseconds each), `dltune report`, then
# check_page.mjs in headless Chromium: every chart draws, no console error or warning, no dialog, no network, the
# hostile strings shown as text and no element they would have injected. Leaves report.html and report.png in
# WORK_DIR. Fails (never skips) when Chromium or web/node_modules is missing: scripts/setup installs them.
# Usage: report_browser_test.sh DLTUNE WORK_DIR SOURCE_DIR
set -euo pipefail
dltune=$1
work=$2
source_dir=$3

test_name=report_browser_test
# shellcheck source=common.sh
source "$source_dir/tests/browser/common.sh"
require_browser_tools "$source_dir"

rm -rf "$work"
mkdir -p "$work"
cd "$work"

# Hostile text in every place a user writes it: the description, scientific values (so sub-study labels), a fixed
# string param; fake_trial.py adds an infeasible reason with a script tag.
cat >hostile.yaml <<EOF
name: hostile_report
description: '<img src=x onerror=alert(1)> & "quotes" </script><script>alert(2)</script>'
command: python3 $source_dir/tests/browser/fake_trial.py
max_train_steps: 200
training:
  eval_every_steps: 20
objective: valid/error_rate
trials: 6
scientific_mode: separate
space:
  optimizer:
    role: scientific
    values: ['<b>bold</b> & co', "it's </script><i>x</i>"]
  learning_rate: {min: 0.001, max: 1.0, scale: log}
  weight_decay: {min: 0.0, max: 0.01}
  note: '<img src=y onerror=alert(3)>'
EOF

# Every page's charts must be readable too (check_page.mjs --readable-charts): tick labels apart, no "1.5e+2", text
# and bars inside their plots, a dot for a series of one point, nothing cut off.
check_page() { node "$source_dir/tests/browser/check_page.mjs" "$@" --readable-charts; }

storage="sqlite://$work/dltune.db"
"$dltune" run hostile.yaml --storage "$storage" --parallel 2 >run.log 2>&1 || { cat run.log; fail "dltune run failed"; }
"$dltune" report hostile_report --storage "$storage" -o report.html || fail "dltune report failed"
[ -s report.html ] || fail "report.html is empty"

# The page must carry no markup from the spec: each hostile string only escaped.
if grep -q '<img src=x' report.html || grep -q '<b>bold' report.html || grep -q '<script>alert' report.html; then
  fail "report.html holds unescaped markup from the study"
fi

check_page "file://$work/report.html" "$work/report.png" \
  --min-charts 8 \
  --expect-text 'Quality against cost: what does a better result cost?' \
  --expect-text 'valid/error_rate against seconds per step' \
  --expect-text 'Hyperparameter importance: which nuisance hyperparameters matter' \
  --expect-text '<img src=x onerror=alert(1)> & "quotes" </script><script>alert(2)</script>' \
  --expect-text 'optimizer=<b>bold</b> & co' \
  --expect-text "loss is NaN at step 45 <script>alert('reason')</script> & more" \
  --forbid-selector 'img' --forbid-selector 'main b' --forbid-selector 'main i' --forbid-selector 'main script'
# The same page in a wider window: the sections' bar and every chart still fully shown.
check_page "file://$work/report.html" "$work/report-1400.png" --min-charts 8 --viewport 1400x900
# A retrain of the hostile study (its scientific values written back into a planned spec), with a hostile note and
# decision: the report's trial-variance and parent sections draw, the decision log shows as text.
"$dltune" plan retrain --from hostile_report --replicas 3 --name hostile_retrain -o retrain.yaml --storage "$storage" \
  >plan.log 2>&1 || { cat plan.log; fail "dltune plan retrain failed"; }
"$dltune" run retrain.yaml --storage "$storage" --parallel 2 --no-report >retrain.log 2>&1 ||
  { cat retrain.log; fail "dltune run of the retrain failed"; }
"$dltune" note hostile_retrain '<b>note</b> & <script>alert(4)</script>' --storage "$storage" >/dev/null ||
  fail "dltune note failed"
"$dltune" decide hostile_retrain --adopt configuration:0 --because '<i>why</i>' --storage "$storage" >/dev/null ||
  fail "dltune decide failed"
"$dltune" report hostile_retrain --storage "$storage" -o retrain.html || fail "dltune report of the retrain failed"
check_page "file://$work/retrain.html" "$work/retrain.png" \
  --min-charts 5 \
  --expect-text 'Trial variance: is the difference larger than the noise?' \
  --expect-text 'Against the parent study: do the rankings hold?' \
  --expect-text '<b>note</b> & <script>alert(4)</script>' --expect-text '<i>why</i>' \
  --expect-text '(95% CI, 3 replicas)' \
  --forbid-selector 'img' --forbid-selector 'main b' --forbid-selector 'main i' --forbid-selector 'main script'
# A step-budget sweep of the same study: its section draws.
"$dltune" plan fit-steps --from hostile_report --fit 'train/error_rate<=0.2' --steps 200 --learning-rates 0.01:0.3:4 \
  -o fit.yaml --storage "$storage" >plan.log 2>&1 || { cat plan.log; fail "dltune plan fit-steps failed"; }
"$dltune" run fit.yaml --storage "$storage" --parallel 2 --no-report >fit.log 2>&1 ||
  { cat fit.log; fail "dltune run of the fit-steps study failed"; }
# A finding marked handled shows as handled, with the note that handled it, as dltune doctor shows it.
"$dltune" note hostile_report-fit-steps --resolves fit_steps_edge 'checked: <b>fine</b>' --storage "$storage" \
  >/dev/null || fail "dltune note --resolves failed"
"$dltune" report hostile_report-fit-steps --storage "$storage" -o fit.html || fail "dltune report of the sweep failed"
grep -q '<li class="handled" data-finding="fit_steps_edge">' fit.html || fail "the handled finding is not shown handled"
check_page "file://$work/fit.html" "$work/fit.png" --min-charts 4 \
  --expect-text 'Steps to fit the training set: a candidate max_train_steps' \
  --expect-text 'Marked handled by note' --expect-text 'checked: <b>fine</b> (fit_steps_edge)' \
  --forbid-selector 'img' --forbid-selector 'main b' --forbid-selector 'main i' --forbid-selector 'main script'
# A batch-size sweep planned from the spec file: its section draws.
"$dltune" plan throughput --from hostile.yaml --batch-sizes 16:64 --steps 20 -o throughput.yaml >plan.log 2>&1 ||
  { cat plan.log; fail "dltune plan throughput failed"; }
"$dltune" run throughput.yaml --storage "$storage" --no-report >throughput.log 2>&1 ||
  { cat throughput.log; fail "dltune run of the throughput sweep failed"; }
"$dltune" report hostile_report-throughput --storage "$storage" -o throughput.html ||
  fail "dltune report of the throughput sweep failed"
check_page "file://$work/throughput.html" "$work/throughput.png" --min-charts 4 \
  --expect-text 'Throughput: which batch sizes pay?' --expect-text 'at most 64, the largest whose doubling still paid' \
  --forbid-selector 'img' --forbid-selector 'main b' --forbid-selector 'main i' --forbid-selector 'main script'
# An instability probe of the study and a warmup study planned from it: their sections draw (log step axes).
"$dltune" plan instability --from hostile_report --steps 100 -o probe.yaml --storage "$storage" >plan.log 2>&1 ||
  { cat plan.log; fail "dltune plan instability failed"; }
"$dltune" run probe.yaml --storage "$storage" --parallel 2 --no-report >probe.log 2>&1 ||
  { cat probe.log; fail "dltune run of the instability probe failed"; }
"$dltune" report hostile_report-instability --storage "$storage" -o probe.html || fail "dltune report of the probe failed"
check_page "file://$work/probe.html" "$work/probe.png" --min-charts 4 \
  --expect-text 'Instability probe: at which learning rate does training become unstable?' \
  --expect-text 'step (log scale)' \
  --forbid-selector 'img' --forbid-selector 'main b' --forbid-selector 'main i' --forbid-selector 'main script'
"$dltune" plan warmup --from hostile_report-instability --unstable-lr 0.05 --warmup-steps 5,20 -o warmup.yaml \
  --storage "$storage" >plan.log 2>&1 || { cat plan.log; fail "dltune plan warmup failed"; }
"$dltune" run warmup.yaml --storage "$storage" --parallel 2 --no-report >warmup.log 2>&1 ||
  { cat warmup.log; fail "dltune run of the warmup study failed"; }
"$dltune" report hostile_report-instability-warmup --storage "$storage" -o warmup.html ||
  fail "dltune report of the warmup study failed"
check_page "file://$work/warmup.html" "$work/warmup.png" --min-charts 4 \
  --expect-text 'Warmup: which warmup trains stably at the higher learning rate?' \
  --forbid-selector 'img' --forbid-selector 'main b' --forbid-selector 'main i' --forbid-selector 'main script'
echo "report_browser_test: ok ($work/report.html, screenshot $work/report.png)"
