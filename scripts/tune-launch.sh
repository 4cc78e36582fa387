#!/usr/bin/env bash
# Tuning step 2 of 3 (docs/oom-tuning.md): start the server through `vllm-hpu-mm serve` (plan, then vLLM's OpenAI
# server), keeping a log; if the server fails, run the doctor on that log (step 3).
#
#   scripts/tune-launch.sh LOGFILE [serve flags and vLLM server args...]
#   e.g. scripts/tune-launch.sh /tmp/vllm.log --model Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 32768
#        scripts/tune-launch.sh /tmp/vllm.log --dry-run      # the plan and the exact command only
#
# First `serve --dry-run --validate`: nothing starts when the plan says the server would not start (exit 1, the
# "fix:" line says what to change) or an argument is refused (exit 2); 3 is a bug in vllm-hpu-mm. Then the launch:
# exit 0 when the server ran and stopped cleanly, otherwise its own exit code, after the doctor's diagnosis.
set -uo pipefail
CLI=${VLLM_HPU_MM:-vllm-hpu-mm}
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then sed -n '2,11p' "$0"; exit 0; fi
if [[ $# -lt 1 ]]; then echo "tune-launch.sh: error: missing LOGFILE (see --help)" >&2; exit 2; fi
log=$1
shift
if ! : >"$log"; then echo "tune-launch.sh: error: cannot write the log $log" >&2; exit 2; fi

dry_run=0
for arg in "$@"; do
    if [[ "$arg" == "--dry-run" ]]; then dry_run=1; fi
done
if [[ $dry_run -eq 1 ]]; then
    "$CLI" serve "$@" 2>&1 | tee "$log"
    exit "${PIPESTATUS[0]}"
fi

# The plan and vLLM's own parser first: their refusals are answers, not a server that failed.
"$CLI" serve --dry-run --validate "$@" >"$log" 2>&1
code=$?
# a dry run's exit 1 for traffic the engine refuses in part is a finding about the traffic, not the server: launch
if [[ $code -eq 1 ]] && grep -qE "requests sampled from the traffic are refused by the (server|engine)" "$log"; then
    cat "$log"
    echo "# launching anyway: the server starts and refuses those requests one by one"
    code=0
fi
if [[ $code -ne 0 ]]; then
    cat "$log"
    case $code in
        1) echo "# nothing started: the plan says the server would not start; apply the fix above (scripts/tune-plan.sh checks it)" ;;
        2) echo "# nothing started: an argument was refused (see the error above)" ;;
        *) echo "# nothing started: vllm-hpu-mm failed (exit $code)" ;;
    esac
    exit "$code"
fi

"$CLI" serve "$@" 2>&1 | tee "$log"
statuses=("${PIPESTATUS[@]}")
code=${statuses[0]}
if [[ ${statuses[1]} -ne 0 ]]; then echo "tune-launch.sh: error: writing the log $log failed" >&2; exit 2; fi
if [[ $code -eq 0 ]]; then exit 0; fi
echo
echo "# the server stopped with exit code $code; asking the OOM doctor (scripts/tune-doctor.sh $log):"
"$(dirname "$0")/tune-doctor.sh" "$log"
exit "$code"
