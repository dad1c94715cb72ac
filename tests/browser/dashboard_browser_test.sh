#!/usr/bin/env bash
# The live dashboard as a person sees it: `dltune run` on a small study with hostile strings in its description,
# params and trial reasons (tests/browser/fake_trial.py trials), then `dltune serve --port 0` and check_page.mjs in
# headless Chromium on the studies page, the study page and a trial page: every chart draws, no console error, no
# dialog, no request to another origin, hostile strings shown as text. Also checks that the server answers only its
# own files. Then notes and decisions written from the page (and refused from other origins). Then the page while
# trials run: a second study starts with slow trials, and the open study page must
# update itself (no reload) until every trial shows completed, its charts drawn again. Leaves the screenshots in
# WORK_DIR. Fails (never skips) when Chromium or web/node_modules is missing.
# Usage: dashboard_browser_test.sh DLTUNE WORK_DIR SOURCE_DIR
set -euo pipefail
dltune=$1
work=$2
source_dir=$3

test_name=dashboard_browser_test
# shellcheck source=common.sh
source "$source_dir/tests/browser/common.sh"
require_browser_tools "$source_dir"

rm -rf "$work"
mkdir -p "$work"
cd "$work"
cat >hostile.yaml <<EOF2
name: hostile_dashboard
description: '<img src=x onerror=alert(1)> & "quotes" </script><script>alert(2)</script>'
command: python3 $source_dir/tests/browser/fake_trial.py
max_train_steps: 200
training:
  eval_every_steps: 20
trials: 6
space:
  optimizer:
    role: scientific
    values: ['<b>bold</b> & co', "it's </script><i>x</i>"]
  learning_rate: {min: 0.001, max: 1.0, scale: log}
  note: '<img src=y onerror=alert(3)>'
EOF2
storage="sqlite://$work/dltune.db"
"$dltune" run hostile.yaml --storage "$storage" --parallel 2 >run.log 2>&1 || { cat run.log; fail "dltune run failed"; }

"$dltune" serve --storage "$storage" --port 0 >serve.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*/' serve.log || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { cat serve.log; fail "dltune serve did not start"; }

# Only the dashboard's own files are served: no path leads elsewhere.
node --input-type=module -e "
const base = process.argv[1];
const expect = async (path, status) => {
  const response = await fetch(base + path);
  if (response.status !== status) { console.error(path + ': ' + response.status + ', expected ' + status); process.exit(1); }
};
await expect('assets/vega.min.js', 200);
await expect('api/studies/hostile_dashboard', 200);
await expect('assets/..%2f..%2fetc%2fpasswd', 404);
await expect('assets/../../etc/passwd', 404);
await expect('assets/package.json', 404);
await expect('api/studies/no_such_study', 404);
const studies = await (await fetch(base + 'api/studies')).json();
if (studies.studies[0].description !== '<img src=x onerror=alert(1)> & \"quotes\" </script><script>alert(2)</script>')
  { console.error('the description changed on its way'); process.exit(1); }
" "$url" || fail "the server's answers"

# Every page's charts must be readable too (--readable-charts: tick labels apart, no "1.5e+2", text and bars inside
# their plots, a dot for a series of one point, nothing cut off).
check() {
  node "$source_dir/tests/browser/check_page.mjs" "$@" --forbid-selector 'main img' --forbid-selector 'main b' \
    --forbid-selector 'main i' --forbid-selector 'main script' --readable-charts
}
check "$url" studies.png --min-charts 0 --expect-text '<img src=x onerror=alert(1)> & "quotes"'
check "${url}#/study/hostile_dashboard" study.png --min-charts 8 \
  --expect-text 'optimizer=<b>bold</b> & co' --expect-text '<img src=y onerror=alert(3)>'
check "${url}#/study/hostile_dashboard/trial/1" trial.png --min-charts 2

# Lineage, decisions and launches: a retrain of the hostile study, a decision about it; the retrain's page shows its
# trial variance and where it comes from, the parent's page the study planned from it.
"$dltune" plan retrain --from hostile_dashboard --replicas 3 --name hostile_retrain -o retrain.yaml \
  --storage "$storage" >plan.log 2>&1 || { cat plan.log; fail "dltune plan retrain failed"; }
"$dltune" run retrain.yaml --storage "$storage" --parallel 2 --no-report >retrain.log 2>&1 ||
  { cat retrain.log; fail "dltune run of the retrain failed"; }
"$dltune" decide hostile_retrain --adopt configuration:1 --because '<b>bolder</b> beats it' --storage "$storage" \
  >/dev/null || fail "dltune decide failed"
check "${url}#/study/hostile_retrain" retrain.png --min-charts 8 \
  --expect-text 'Trial variance: is the difference larger than the noise?' --expect-text 'planned from' \
  --expect-text '<b>bolder</b> beats it' --expect-text '(95% CI, 3 replicas)'
check "${url}#/study/hostile_dashboard" parent.png --min-charts 8 --expect-text 'planned from it'

# A throughput sweep and a learning-rate sweep: the dashboard draws their sections from the same analyses as the report
# (not "No batch size has recorded its step times yet" nor "no learning rate fits"), the sweep's result is the batch
# size it recommends, never a best validation error, and a finding marked handled shows as handled.
"$dltune" plan throughput --from hostile.yaml --batch-sizes 16:64 --steps 20 -o throughput.yaml >plan.log 2>&1 ||
  { cat plan.log; fail "dltune plan throughput failed"; }
"$dltune" run throughput.yaml --storage "$storage" --no-report >throughput.log 2>&1 ||
  { cat throughput.log; fail "dltune run of the throughput sweep failed"; }
grep -q '^throughput: batch size 64 (' throughput.log || { cat throughput.log; fail "the run's summary names no batch size"; }
if grep -q '^best of ' throughput.log; then cat throughput.log; fail "the run's summary ranks the sweep by its objective"; fi
check "${url}#/study/hostile_dashboard-throughput" throughput.png --min-charts 4 \
  --expect-text 'Throughput: which batch sizes pay?' --expect-text 'recommended batch size 64' \
  --expect-text 'batch size 64 (' --forbid-text 'No batch size has recorded its step times yet'
check "$url" studies-throughput.png --min-charts 0 --expect-text 'batch size 64 ('
"$dltune" plan fit-steps --from hostile_dashboard --fit 'train/error_rate<=0.2' --steps 200 \
  --learning-rates 0.01:0.3:4 -o fit.yaml --storage "$storage" >plan.log 2>&1 ||
  { cat plan.log; fail "dltune plan fit-steps failed"; }
"$dltune" run fit.yaml --storage "$storage" --parallel 2 --no-report >fit.log 2>&1 ||
  { cat fit.log; fail "dltune run of the fit-steps study failed"; }
"$dltune" note hostile_dashboard-fit-steps --resolves fit_steps_edge 'checked: <b>fine</b>' --storage "$storage" >/dev/null ||
  fail "dltune note --resolves failed"
check "${url}#/study/hostile_dashboard-fit-steps" fit.png --min-charts 4 \
  --expect-text 'Steps to fit the training set: a candidate max_train_steps' \
  --expect-text 'candidate max_train_steps' --forbid-text 'no learning rate fits' \
  --expect-text 'Marked handled by note' --expect-text 'checked: <b>fine</b> (fit_steps_edge)'

# Writing from the page (dashboard_writes.mjs): a note and a decision through the study page's forms, shown in its
# tracking record without a reload; a wrong token refused with the server's message; another origin's fetch and form
# refused. The rows stored must be those `dltune note` and `dltune decide` store, and nothing forged may be stored.
page_url=$(grep -o 'http://127.0.0.1:[0-9]*/?token=[0-9a-f]*' serve.log) || { cat serve.log; fail "dltune serve printed no token"; }
written_note='<i>seen</i> from the page & "kept"'
written_because='adopted <b>from</b> the page'
node "$source_dir/tests/browser/dashboard_writes.mjs" "$page_url" hostile_dashboard "$written_note" trial:1 \
  "$written_because" 'forged from another site' write.png || fail "writing notes and decisions from the dashboard"
"$dltune" note hostile_dashboard "$written_note" --storage "$storage" >/dev/null || fail "dltune note failed"
"$dltune" decide hostile_dashboard --adopt trial:1 --because "$written_because" --storage "$storage" >/dev/null ||
  fail "dltune decide failed"
python3 - "$work/dltune.db" <<'EOF2' || fail "the dashboard's rows are not the commands' rows"
import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute(
    "SELECT n.kind, n.adopt, n.text, n.author, n.resolves FROM study_notes n JOIN studies s ON s.id = n.study_id "
    "WHERE s.name = 'hostile_dashboard' ORDER BY n.id").fetchall()
print("hostile_dashboard's decision log:", rows)
assert len(rows) == 4, "expected the page's note and decision, then the commands'"
assert rows[0] == rows[2] and rows[1] == rows[3], "the page stored other rows than dltune note and dltune decide"
assert not any("forged" in row[2] for row in rows), "a forged note was stored"
EOF2
# A read-only dashboard (here one that needs its token for reading too) shows no forms, and says why.
"$dltune" serve --storage "$storage" --port 0 --read-only --token readonly >serve-ro.log 2>&1 &
read_only=$!
trap 'kill $server $read_only 2>/dev/null || true' EXIT
ro_url=""
for _ in $(seq 100); do
  ro_url=$(grep -o 'http://127.0.0.1:[0-9]*/?token=readonly' serve-ro.log || true)
  [ -n "$ro_url" ] && break
  sleep 0.1
done
[ -n "$ro_url" ] || { cat serve-ro.log; fail "dltune serve --read-only did not start"; }
node "$source_dir/tests/browser/dashboard_writes.mjs" --read-only "${ro_url}#/study/hostile_dashboard" read-only.png ||
  fail "the read-only dashboard's page"
kill $read_only

# Live: the study page, opened while the first trials train, follows the study to its end by itself.
cat >live.yaml <<EOF2
name: live_dashboard
command: python3 $source_dir/tests/browser/fake_trial.py
max_train_steps: 100
training:
  eval_every_steps: 20
trials: 4
space:
  learning_rate: {min: 0.001, max: 0.1, scale: log}
EOF2
FAKE_TRIAL_STEP_SECONDS=0.04 "$dltune" run live.yaml --storage "$storage" --parallel 2 --no-report >live.log 2>&1 &
runner=$!
trap 'kill $server $runner 2>/dev/null || true' EXIT
# Open the page once the study has a chart (a trial has evaluated), so it has something to draw from the start.
python3 - "${url}api/studies/live_dashboard" <<'EOF2' || { cat live.log; fail "the live study never showed a chart"; }
import json, sys, time, urllib.request, urllib.error
for _ in range(300):
    try:
        if any(section["charts"] for section in json.load(urllib.request.urlopen(sys.argv[1]))["sections"]):
            sys.exit(0)
    except urllib.error.HTTPError:
        pass
    time.sleep(0.05)
sys.exit(1)
EOF2
check "${url}#/study/live_dashboard" live.png --min-charts 1 --then-wait-for '4 completed' --timeout 60000 \
  --expect-text 'Have we sampled enough?'
wait $runner || { cat live.log; fail "the live study's run failed"; }
echo "dashboard_browser_test: ok (screenshots in $work)"
