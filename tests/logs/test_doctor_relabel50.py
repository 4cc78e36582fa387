"""Kinds of line whose labels differed between rounds, labelled again by two blind labellers at stop 50
(tests/data/logs/SOURCES.md, "Stop 50: blind relabels ..."), each pinned on lines composed after the public logs it
names; the doctor answers by the labels of record:

- TensorRT's builder failing while it builds an engine (its "TensorRT-managed allocation in building engine" line
  before the failure) is start-up, whatever program drives the build.

(LMDeploy TurboMind's model instance, created as the engine is set up, is start-up: test_doctor_round11.py; llama.cpp's
loader summary after a tensor that failed to initialise is an out-of-memory failure at start-up:
test_doctor_round13.py.)"""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- a TensorRT engine build ----------------------------------------------------------------------------------------


def test_a_failure_while_tensorrt_builds_an_engine_is_start_up() -> None:
    # open-mmlab/mmdeploy #641: MMDeploy's converter builds the TensorRT engine a deployment will load
    d = diagnose_lines([
        "[06/24/2022-16:29:30] [TRT] [I] Total Activation Memory: 294057472",
        "[06/24/2022-16:29:37] [TRT] [I] [MemUsageChange] TensorRT-managed allocation in building engine: CPU +22, "
        "GPU +512, now: CPU 22, GPU 512 (MiB)",
        "[06/24/2022-16:29:37] [TRT] [E] 1: Unexpected exception std::bad_alloc",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (True, "startup")
    # the failure alone names no stage
    assert diagnose_lines(["[06/24/2022-16:29:37] [TRT] [E] 1: Unexpected exception std::bad_alloc"]).stage == "unknown"
