#!/usr/bin/env bash
# Fashion-MNIST test accuracy of the built-in workloads with documented hyperparameters, against fixed bars:
#   fashion_mnist_mlp (784-512-256-10, dropout 0.2) >= 88.5%   (8000 steps, about 20 epochs)
#   fashion_mnist_cnn (conv 32-64, dense 128, batch norm, dropout 0.3) >= 91.5%   (2000 steps, about 5 epochs)
# Both: batch 128, Nesterov momentum 0.9, learning rate 0.05 with 200 warmup steps then cosine decay to 0, weight decay,
# seed 0; test accuracy = 1 - test/error_rate at the last step (--test), valid = the last 10,000 training images.
# Exits 1 if a run fails or a bar is missed.
#
# Usage: bench/fashion_mnist_accuracy.sh [DLTUNE_BINARY]
#   DLTUNE_BINARY  default: $DLTUNE, else dltune on PATH, else the newest build/*/bin/dltune
#   THREADS=N      LibTorch threads per run (default 2)
#   KEEP=1         keep the run directories (metrics.jsonl, checkpoints)
# About 3 + 3.5 minutes on 2 threads of an otherwise idle 2-core machine. OpenBLAS 0.3.21 (Debian 12) falls back to
# its slow generic kernels on CPUs it does not know (it says "Core: Prescott" with OPENBLAS_VERBOSE=2); on such an
# AVX-512 CPU, OPENBLAS_CORETYPE=SkylakeX makes the MLP run about 2.5x faster.
set -euo pipefail
dltune=${1:-${DLTUNE:-}}
if [ -n "$dltune" ] && [ -e "$dltune" ]; then dltune=$(realpath "$dltune"); fi
cd "$(dirname "$0")/.."
if [ -z "$dltune" ]; then dltune=$(command -v dltune || true); fi
# shellcheck disable=SC2012  # ls -t: the newest build
if [ -z "$dltune" ]; then dltune=$(ls -t build/*/bin/dltune 2>/dev/null | head -n 1 || true); fi
if [ -z "$dltune" ] || [ ! -x "$dltune" ]; then
  echo "fashion_mnist_accuracy: no dltune binary; build one (cmake --build BUILD --target dltune_cli) or pass its path" >&2
  exit 1
fi
threads=${THREADS:-2}
out=$(mktemp -d "${TMPDIR:-/tmp}/dltune_fashion_mnist_accuracy.XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$out"' EXIT; fi

common=(--set optimizer=nesterov --set learning_rate=0.05 --set momentum=0.9 --set schedule=cosine
        --set warmup_steps=200 --set batch_size=128 --seed 0 --threads "$threads" --test)
mlp=(fashion_mnist_mlp --set 'hidden_sizes=[512,256]' --set dropout=0.2 --set weight_decay=0.00005
     --steps 8000 --eval-every 1000)
cnn=(fashion_mnist_cnn --set 'conv_channels=[32,64]' --set dense_size=128 --set normalization=batch --set dropout=0.3
     --set weight_decay=0.0001 --steps 2000 --eval-every 500)

# The test error rate at the last evaluation in DIR/metrics.jsonl.
test_error() {
  grep '"type":"eval"' "$1/metrics.jsonl" | grep '"split":"test"' | grep '"metric":"error_rate"' | tail -n 1 |
    sed -E 's/.*"value":([-0-9.eE+]+).*/\1/'
}

failed=0
results=()
run() {
  local name=$1 bar=$2
  shift 2
  echo "== $name: $dltune train $* --out $out/$name"
  local start=$SECONDS
  if ! "$dltune" train "$@" --out "$out/$name" | grep --line-buffered -v '^step '; then
    echo "fashion_mnist_accuracy: $name: dltune train failed" >&2
    results+=("$(printf '%-20s %8s %8s  %s' "$name" "-" ">= $bar%" "FAILED (run)")")
    failed=1
    return
  fi
  local error
  error=$(test_error "$out/$name")
  if [ -z "$error" ]; then
    echo "fashion_mnist_accuracy: $name: no test/error_rate in $out/$name/metrics.jsonl" >&2
    results+=("$(printf '%-20s %8s %8s  %s' "$name" "-" ">= $bar%" "FAILED (no test metric)")")
    failed=1
    return
  fi
  local accuracy verdict
  accuracy=$(awk -v e="$error" 'BEGIN { printf "%.2f", 100 * (1 - e) }')
  if awk -v a="$accuracy" -v b="$bar" 'BEGIN { exit !(a >= b) }'; then verdict=met; else verdict=MISSED; failed=1; fi
  results+=("$(printf '%-20s %7s%% %8s  %-6s (%ds)' "$name" "$accuracy" ">= $bar%" "$verdict" $((SECONDS - start)))")
}

run fashion_mnist_mlp 88.5 "${mlp[@]}" "${common[@]}"
run fashion_mnist_cnn 91.5 "${cnn[@]}" "${common[@]}"

echo
printf '%-20s %8s %8s  %s\n' workload "test acc" bar result
for line in "${results[@]}"; do echo "$line"; done
if [ "${KEEP:-0}" = 1 ]; then echo "runs kept in $out"; fi
exit "$failed"
