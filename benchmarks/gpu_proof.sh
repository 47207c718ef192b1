#!/usr/bin/env bash
# The GPU proof in one command: every rule's benchmark pair (sync proof and step timing), the
# end-to-end segmentation case, and `perflint trace` of the segmentation loop before and after
# `perflint fix --unsafe-fixes`, written where the docs read them.
#
#   benchmarks/gpu_proof.sh [--device cuda|cpu|auto] [--out DIR] [BENCH OPTIONS...]
#
# DIR (default docs/benchmarks) receives:
#   cuda-<gpu>.json / cpu.json   the whole bench run (`perflint bench --output-dir`)
#   rule_summaries.json          merged per-rule figures, read by `python -m perflint.docs`
#   <kind>-bench.md              the run as a markdown table
#   <kind>-speedups.png          the chart (speedups on a GPU, sync counts on a CPU)
#   trace-<kind>-train.json      `perflint trace` of examples/segmentation/train.py
#   trace-<kind>-train_fixed.json  the same for train_fixed.py
# Other options (`--rule PFL201`, `--no-sweep`, `--steps 100`) go to `perflint bench`.
#
# It runs on a bare machine without network: when perflint is not installed it is run from this
# checkout, and wheels in .whl/ (libcst for the machine's Python; tensorboard and its
# dependencies, which the tracker-logging pair logs to) are installed first into a temporary
# folder. CI runs the CPU path (tests/test_gpu_proof.py) so the script cannot rot.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
device=auto
out=docs/benchmarks
bench_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --device) device=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) bench_args+=("$1"); shift ;;
    esac
done
py=${PYTHON:-python3}
mkdir -p "$out"

if ! "$py" -c "import perflint_rules, libcst, tensorboard" 2>/dev/null; then
    site=$(mktemp -d)
    if compgen -G ".whl/*.whl" >/dev/null; then
        "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl
    fi
    # perflint_rules is the rules/ folder under its installed name (pyproject's package-dir).
    ln -s "$repo/perflint" "$site/perflint"
    ln -s "$repo/rules" "$site/perflint_rules"
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi

if [ "$device" = auto ]; then
    device=$("$py" -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
fi
"$py" - <<'EOF'
import platform, torch
print(f"python {platform.python_version()}, torch {torch.__version__}, cuda available: {torch.cuda.is_available()}")
if torch.cuda.is_available():
    print("gpu:", torch.cuda.get_device_name())
EOF

echo "== perflint bench --device $device" >&2
bench_status=0
"$py" -m perflint bench --device "$device" --e2e examples/segmentation --output-dir "$out" \
    --plot "$out/$device-speedups.png" --output-format markdown "${bench_args[@]}" >"$out/$device-bench.md" || bench_status=$?
cat "$out/$device-bench.md"

# On a CPU build trace simulates the accelerator; on a GPU it sees the real syncs.
for script in train train_fixed; do
    echo "== perflint trace examples/segmentation/$script.py $device" >&2
    "$py" -m perflint trace --exit-zero --quiet --output-format json -o "$out/trace-$device-$script.json" \
        "examples/segmentation/$script.py" "$device" 20 >/dev/null
    "$py" - "$out/trace-$device-$script.json" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
sites = report if isinstance(report, list) else report.get("findings", report.get("sites", []))
print(f"{sys.argv[1]}: {len(sites)} sync sites")
EOF
done
# A failed rule (a claim the GPU did not bear out) fails the proof, after everything is written.
exit "$bench_status"
