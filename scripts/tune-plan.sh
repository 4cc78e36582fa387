#!/usr/bin/env bash
# Tuning step 1 of 3 (docs/oom-tuning.md): show the memory plan for a model on a device, before anything starts.
#
#   scripts/tune-plan.sh [memory-plan flags...]
#   e.g. scripts/tune-plan.sh --model Qwen/Qwen2.5-VL-7B-Instruct --device gaudi2 --max-model-len 32768
#        scripts/tune-plan.sh --total-memory-gib 100 --free-memory-gib 100 --gpu-memory-utilization 1
#        scripts/tune-plan.sh ... --json     # only the plan's JSON object, nothing else
#
# Prints the plan table, then what serve hands the plan's runtime (its environment, files, server arguments), written
# so that plain vLLM can use it too. Exit 0: fits; 1: does not fit (the table's "fix:" lines say what to change);
# 2: bad input; 3: unexpected error; any other failure: non-zero.
set -uo pipefail
CLI=${VLLM_HPU_MM:-vllm-hpu-mm}
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then sed -n '2,11p' "$0"; exit 0; fi
for arg in "$@"; do
    if [[ "$arg" == "--json" ]]; then exec "$CLI" memory plan "$@"; fi
done

"$CLI" memory plan "$@"
code=$?
if [[ $code -ne 0 && $code -ne 1 ]]; then exit "$code"; fi
echo
"$CLI" memory plan "$@" --json | python3 -c '
import json, shlex, sys
from pathlib import Path
p = json.load(sys.stdin)
e, runtime = p["exports"], p["runtime"]
print(f"# what serve hands {runtime} for this plan (scripts/tune-launch.sh does it itself; these lines let plain "
      "vLLM use it):")
for path, text in e["files"].items():
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text, encoding="utf-8")
    print(f"# wrote {path}")
for name, value in e["environment"].items():
    print(f"export {name}={shlex.quote(value)}")
if e["server_args"]:
    print("# server arguments: " + shlex.join(e["server_args"]))
for w in p["warnings"]:
    print("# " + w["severity"] + ": " + w["fix"])
'
statuses=("${PIPESTATUS[@]}")
if [[ ${statuses[1]} -ne 0 ]]; then echo "tune-plan.sh: error: could not read the plan's JSON" >&2; exit 3; fi
if [[ ${statuses[0]} -ne $code ]]; then
    echo "tune-plan.sh: error: the JSON plan exited ${statuses[0]}, the table $code" >&2
    exit 3
fi
exit "$code"
