#!/usr/bin/env bash
# examples/slurm/ as shipped, on a throw-away single-node Slurm cluster (scripts/slurm-test-cluster): the worker job
# array trains a study of independent trials, and the gang job trains a data-parallel study whose trials each run as
# 2 ranks, one per task. Waits for both jobs, checks every trial completed and how, and stops the cluster. Fails, never
# skips: a part of Slurm that cannot run here is an error.
#
#   tests/slurm/slurm_test.sh DLTUNE_BINARY SOURCE_DIR
set -euo pipefail

readonly kDltune=$(realpath "$1")
readonly kSource=$(realpath "$2")
readonly kWaitSeconds=300

work=$(mktemp -d "${TMPDIR:-/tmp}/dltune_slurm_XXXXXX")
Cleanup() {
  local status=$?
  "$kSource/scripts/slurm-test-cluster" stop "$work/cluster" || true
  if ((status == 0)); then rm -rf "$work"; else echo "slurm test: failed; its files are in $work" >&2; fi
}
trap Cleanup EXIT
Fail() {
  echo "slurm test: $*" >&2
  for log in "$work"/*.log "$work"/cluster/log/slurmctld.log; do
    [[ -f $log ]] && { echo "--- $log" >&2; tail -20 "$log" >&2; }
  done
  exit 1
}

"$kSource/scripts/slurm-test-cluster" start "$work/cluster"
# shellcheck source=/dev/null
source "$work/cluster/env"
export PATH=$(dirname "$kDltune"):/usr/sbin:$PATH
export DLTUNE_STORAGE=sqlite://$work/dltune.db
cd "$work"

cat >gang.yaml <<SPEC
name: gang
run_dir: $work/runs/gang
workload: {name: fashion_mnist_mlp, args: {hidden_sizes: [64]}}
max_train_steps: 60
training: {eval_every_steps: 20, train_eval_examples: 1000, processes: 2, collective_timeout: 60s}
trials: 2
space:
  optimizer: adam
  learning_rate: {min: 0.001, max: 0.01, scale: log}
  batch_size: 64
SPEC
cat >array.yaml <<SPEC
name: array
run_dir: $work/runs/array
workload: synthetic
max_train_steps: 100
trials: 6
space:
  learning_rate: {min: 0.01, max: 1.0, scale: log}
SPEC

# The gang job as shipped, on one node (this cluster has one). Its worker creates the store and the study.
gang_job=$(sbatch --parsable --nodes=1 --time=10 --export=ALL,DLTUNE_SPEC=gang.yaml \
  "$kSource/examples/slurm/dltune-gang.sbatch") || Fail "sbatch of the gang job failed"
for _ in $(seq 1 300); do
  dltune studies 2>/dev/null | grep -q '^gang' && break
  sleep 0.2
done
# The worker array as shipped, 2 tasks of 2 CPUs and 1 GB here instead of 8 of 4 CPUs and 16 GB.
array_job=$(sbatch --parsable --array=0-1 --cpus-per-task=2 --mem=1G --time=10 \
  --export=ALL,DLTUNE_SPEC=array.yaml "$kSource/examples/slurm/dltune-worker.sbatch") ||
  Fail "sbatch of the worker array failed"
echo "slurm test: submitted gang job $gang_job and worker array $array_job"

waited=0
while [[ -n $(squeue -h -o '%i' 2>/dev/null) ]]; do
  ((waited < kWaitSeconds)) || Fail "the jobs still run after ${kWaitSeconds} s: $(squeue 2>&1)"
  sleep 1
  waited=$((waited + 1))
done
echo "slurm test: both jobs ended after about ${waited} s"

studies=$(dltune studies)
echo "$studies"
grep -E '^gang .* 2 done' <<<"$studies" >/dev/null || Fail "the gang study's 2 trials did not complete"
grep -E '^array .* 6 done' <<<"$studies" >/dev/null || Fail "the array study's 6 trials did not complete"

# Each gang trial ran as 2 ranks: rank 1 trained on the other task and reported nothing; rank 0 wrote the checkpoints.
for trial in 0 1; do
  dir=$(ls -d "$work"/runs/gang/*/trial_$trial)
  grep -q "data-parallel rank 1 of 2" "$dir/rank_1.log" || Fail "trial $trial: no rank 1 in $dir/rank_1.log"
  grep -q "data-parallel rank 0 of 2" "$dir/stdout.log" || Fail "trial $trial: rank 0 was not a rank of 2"
  ls "$dir"/checkpoints/step_00000060 >/dev/null || Fail "trial $trial: no checkpoint of step 60"
done
grep -q "rank 1 of trial 1 started" dltune-gang-"$gang_job".log ||
  Fail "the gang's second worker did not start rank 1 of trial 1"
# Both array tasks worked on the study (the first created it, the second opened it).
ls dltune-worker-"$array_job"_0.log dltune-worker-"$array_job"_1.log >/dev/null || Fail "an array task left no log"
echo "slurm test: passed"
