#!/usr/bin/env bash
# Tuning step 2 of 3 (docs/oom-tuning.md): start the server through `vllm-hpu-mm serve` (plan, then vLLM's OpenAI
# server), keeping a log; if it fails, run the doctor on that log (step 3).
#
#   scripts/tune-launch.sh LOGFILE [serve flags and vLLM server args...]
#   e.g. scripts/tune-launch.sh /tmp/vllm.log --model Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 32768
#        scripts/tune-launch.sh /tmp/vllm.log --dry-run      # the plan and the exact command only
#
# Exit 0 when serve succeeded; 2 when it refused before starting (bad argument, or a plan that cannot fit);
# otherwise the server's own non-zero exit code, after the doctor's diagnosis (OOM or not).
set -uo pipefail
CLI=${VLLM_HPU_MM:-vllm-hpu-mm}
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then sed -n '2,10p' "$0"; exit 0; fi
if [[ $# -lt 1 ]]; then echo "tune-launch.sh: error: missing LOGFILE (see --help)" >&2; exit 2; fi
log=$1
shift
if ! : >"$log"; then echo "tune-launch.sh: error: cannot write the log $log" >&2; exit 2; fi

"$CLI" serve "$@" 2>&1 | tee "$log"
statuses=("${PIPESTATUS[@]}")
code=${statuses[0]}
if [[ ${statuses[1]} -ne 0 ]]; then echo "tune-launch.sh: error: writing the log $log failed" >&2; exit 2; fi
if [[ $code -eq 0 ]]; then exit 0; fi
if [[ $code -eq 2 ]]; then
    echo "# refused before anything started (bad argument, or a plan that cannot fit): see the fix above"
    exit 2
fi
echo
echo "# the server stopped with exit code $code; asking the OOM doctor (scripts/tune-doctor.sh $log):"
"$(dirname "$0")/tune-doctor.sh" "$log"
exit "$code"
