#!/usr/bin/env bash
# Tuning step 3 of 3 (docs/oom-tuning.md): read a failed server log, say where it ran out of memory, and what to
# change; then re-plan with the new settings (step 1) before launching again (step 2).
#
#   scripts/tune-doctor.sh LOGFILE [--model NAME] [--json]
#
# Exit 1 when an out-of-memory failure was found, 0 when none, 2 when the log cannot be read, 3 unexpected error.
set -uo pipefail
CLI=${VLLM_HPU_MM:-vllm-hpu-mm}
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then sed -n '2,7p' "$0"; exit 0; fi
if [[ $# -lt 1 ]]; then echo "tune-doctor.sh: error: missing LOGFILE (see --help)" >&2; exit 2; fi

"$CLI" oom-doctor "$@"
code=$?
if [[ $code -eq 1 && " $* " != *" --json "* ]]; then
    echo
    echo "# next: apply one recommendation above (export the variable or change the flag), check it with"
    echo "#   scripts/tune-plan.sh <the same model/device flags>"
    echo "# and launch again with scripts/tune-launch.sh."
fi
exit $code
