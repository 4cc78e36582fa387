"""Stage readings after rounds 58-61 (issue 34) for programs other than serving engines, each a class any program's
log can show, pinned on lines composed after the programs' sources and the public logs under
tests/data/logs/heldout_round59/ and heldout_round61/:

- A failure logged by a program's trainer (a logger named ``<package>.trainer``: fairseq's trainer logs its
  out-of-memory warning from its training and validation steps only) came while training ran: ``runtime``. The
  logger's name is read as a frame's name would be, so a loader's logger says start-up and a logger named for what it
  builds says nothing.
- A server that answers a request with HTTP 507 Insufficient Storage ran out of room for that request: ``runtime``.
  A plain 500 says nothing of the kind (a server that loads its model on a request's arrival answers 500 when the
  load fails).
- transformers' generation pipelines weigh each input's length before they generate for it; a failure after that
  line came while a script worked through its inputs: ``runtime``."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines
from vllm_hpu_mm.logs.doctor.phases import logger_stage, work_item_stage

CUDA_OOM = ("CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; 10.92 GiB total capacity; 8.30 GiB already "
            "allocated; 300.00 MiB free; 10.00 GiB reserved in total by PyTorch)")  # fmt: skip


# --- a trainer's logger --------------------------------------------------------------------------------------------


def test_an_oom_logged_by_a_trainer_is_runtime() -> None:
    line = f"2022-01-01 10:00:00 | WARNING | fairseq.trainer | OOM: Ran out of memory with exception: {CUDA_OOM}"
    d = diagnose_lines([line])
    assert (d.oom, d.stage) == (True, "runtime")


def test_a_logger_name_reads_as_a_frame_name_would() -> None:
    assert logger_stage("2022-01-01 10:00:00,001 - mytool.model_loader - ERROR - out of memory") == "startup"
    assert logger_stage("2022-01-01 10:00:00,001 - machine.jobs.build_nmt_engine - ERROR - out of memory") is None
    assert logger_stage("2022-01-01 10:00:00 | ERROR | root | out of memory") is None  # no dotted module name


# --- a 507 reply ---------------------------------------------------------------------------------------------------


def test_a_507_insufficient_storage_reply_is_runtime() -> None:
    line = ('Backend returned error: 507 INSUFFICIENT STORAGE {"detail":{"msg":"ran out of memory: CUDA error: out of '
            'memory","type":"out_of_memory.gpu.cuda"}}')  # fmt: skip
    d = diagnose_lines([line])
    assert (d.oom, d.stage) == (True, "runtime")


def test_a_500_reply_names_no_request_work() -> None:
    assert work_item_stage("Error: 500 Internal Server Error: llama runner process has terminated") is None


# --- a generation pipeline's input check -----------------------------------------------------------------------------


def test_an_oom_after_a_pipeline_weighed_its_input_is_runtime() -> None:
    lines = [
        "[WARNING|text2text_generation.py:307] 2023-10-10 15:56:27,604 >> Your input_length: 600 is bigger than 0.9 * "
        "max_length: 200. You might consider increasing your max_length manually, e.g. translator('...', "
        "max_length=400)",
        "2023-10-10 15:56:29,603 - myjobs.translate_batch_job - ERROR - " + CUDA_OOM.replace("1.50 GiB", "16.00 MiB"),
    ]
    d = diagnose_lines(lines)
    assert (d.oom, d.stage) == (True, "runtime")
