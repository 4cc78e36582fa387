"""Stage readings after rounds 54-57 (issue 34), each a class any program's log can show, pinned on lines composed
after the programs' sources and the public logs under tests/data/logs/heldout_round54/ and heldout_round55/:

- An allocator that backs off (one allocation refused, asked again smaller, each refusal logged: TensorFlow's BFC
  allocator at 0.9 of the size) printed one failure, not many: five such lines do not make a worker that failed again
  and again while serving. Any size failing again after other lines still counts; the same size refused again with
  nothing between is one failure reported again (round 79's Metal lines, test_doctor_round79_stages).
- A trainer's loop named ``fit`` (Keras, Lightning, verl) runs step after step over the data, as ``train`` does: a
  failure below it is ``runtime``. Inside a longer name (``params_fit``) the word says nothing."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines
from vllm_hpu_mm.logs.doctor.phases import named_stage

SITE = "/usr/lib/python3.10/site-packages"


def refused(size: str, count: int) -> str:
    return (f"2024-03-01 10:00:00.000001: E xla/stream_executor/cuda/cuda_driver.cc:700] failed to allocate {size} "
            f"({count} bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory")  # fmt: skip


# --- an allocator's back-off is one failure ------------------------------------------------------------------------


def test_an_allocator_backing_off_is_one_failure_with_no_stage() -> None:
    # each retry asks for 0.9 of the one before: one region refused five times, nothing says at which step
    sizes = [(f"{g:.2f}GiB", int(g * 2**30)) for g in (20.0, 18.0, 16.2, 14.58, 13.12)]
    d = diagnose_lines([refused(s, n) for s, n in sizes])
    assert (d.oom, d.stage, d.basis) == (True, "unknown", "unknown")


def test_the_same_size_refused_again_after_other_lines_is_repeated_failure() -> None:
    d = diagnose_lines([refused("2.00GiB", 2 * 2**30), "INFO batch done"] * 6)
    assert (d.stage, d.basis) == ("runtime", "repeated")


def test_the_same_size_refused_again_with_nothing_between_is_one_failure() -> None:
    d = diagnose_lines([refused("2.00GiB", 2 * 2**30)] * 6)
    assert (d.oom, d.stage, d.basis) == (True, "unknown", "unknown")


def test_smaller_sizes_with_other_lines_between_are_separate_failures() -> None:
    lines = []
    for g in (8.0, 6.0, 4.0, 3.0, 2.0):
        lines += [refused(f"{g:.2f}GiB", int(g * 2**30)), "INFO batch done"]
    d = diagnose_lines(lines)
    assert (d.stage, d.basis) == ("runtime", "repeated")


# --- a trainer's fit loop ------------------------------------------------------------------------------------------


def test_a_failure_below_a_trainers_fit_loop_is_runtime() -> None:
    # volcengine/verl #647: a Ray task's remote traceback through the trainer's fit, its inner frames left out
    lines = ["ray.exceptions.RayTaskError(OutOfMemoryError): ray::main_task() (pid=1234, ip=10.0.0.1)",
             '  File "/srv/trainer/main.py", line 160, in main_task', "    trainer.fit()",
             '  File "/srv/trainer/ppo_trainer.py", line 900, in fit', "    batch = self.rollout(batch)",
             "..."]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.oom, d.stage) == (True, "runtime")


def test_fit_inside_a_longer_name_says_nothing() -> None:
    assert named_stage([(f"{SITE}/loader/memory.py", "params_fit")]) is None
    assert named_stage([(f"{SITE}/keras/trainer.py", "fit")]) == ("runtime", 0)
