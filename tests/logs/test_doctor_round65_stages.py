"""The classes rounds 63-65's stage misses belong to (issue 34): an out-of-memory failure or a kill the doctor
recognised and answered ``unknown`` although the program's own lines say when it came. Each is pinned on lines
composed after the public logs under tests/data/logs/heldout_round63/ and heldout_round65/ and on another program that
says the same in its own words; lines that do not say when keep the failure ``unknown``.

- A program's own line announcing what it is doing before the failure: a clause that opens with a verb of working over
  its inputs (transcribing, generating, embedding) is serving; one that opens with loading is start-up; a progress bar
  drawn full says its work is done.
- The failure's own line saying it failed while the program worked over its inputs ("Error processing batch of 3
  sequences: ...") is serving; failing while processing the program's own weights is not.
- text-generation-webui's report of the reply it produced after the failure is serving, with or without the context's
  token count."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

TORCH_OOM = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 8.00 GiB total)"

# --- a program's own line announcing its work -----------------------------------------------------------------------


def test_a_kill_after_a_line_announcing_transcription_is_serving() -> None:
    # SYSTRAN/faster-whisper #373: the model loaded, the audio being decoded and transcribed, then the host kills it
    d = diagnose_lines(["Model loaded, transcribing next", "Estimating duration from bitrate", "Killed"])
    assert d.stage == "runtime"
    d = diagnose_lines(["2024-05-01 10:00:01 INFO Generating captions for 1200 images", "Killed"])
    assert d.stage == "runtime"


def test_a_kill_after_a_line_announcing_a_load_is_startup() -> None:
    # oobabooga/textgen #41: the web UI loads the model it was started with, and is killed
    assert diagnose_lines(["Loading pygmalion-6b...", "Killed"]).stage == "startup"
    # RUCAIBox/TextBox #334: a trainer loading its data set before the first step
    assert diagnose_lines(["24 Mar 14:25    INFO Loading data from scratch", "killed"]).stage == "startup"


def test_a_full_loading_bar_announces_nothing() -> None:
    # the shards are loaded: the bar says the load is done, not that it was under way when the failure came
    bar = "Loading checkpoint shards: 100%|██████████| 2/2 [00:00<00:00,  5.56it/s]"
    assert diagnose_lines([bar, TORCH_OOM]).stage == "unknown"


def test_a_kill_after_words_that_announce_no_work_stays_unknown() -> None:
    assert diagnose_lines(["Estimating duration from bitrate, this may be inaccurate", "Killed"]).stage == "unknown"
    assert diagnose_lines(["Default sampling parameters have been overridden", "Killed"]).stage == "unknown"


# --- the failure's line says it failed while working ----------------------------------------------------------------


def test_a_failure_while_processing_a_batch_of_inputs_is_serving() -> None:
    # sacdallago/bio_embeddings #217: the embedder logs the batch of sequences it was embedding
    line = (
        "ERROR:bio_embeddings.embed.embedder_interfaces:Error processing batch of 3 sequences: CUDA out of "
        "memory. Tried to allocate 972.00 MiB (GPU 1; 7.80 GiB total capacity)"
    )
    assert diagnose_lines([line]).stage == "runtime"
    assert diagnose_lines(["Failed while generating the image: CUDA out of memory."]).stage == "runtime"


def test_a_failure_while_processing_the_programs_own_parts_stays_unknown() -> None:
    assert diagnose_lines(["Error processing weights: CUDA out of memory. Tried to allocate 2.00 GiB"]).stage == (
        "unknown"
    )


# --- a host's report of the reply it produced -----------------------------------------------------------------------


def test_text_generation_webuis_reply_report_without_its_context_count_is_serving() -> None:
    # oobabooga/textgen #1041: the reply's report, its context count missing as posted
    report = "Output generated in 6.34 seconds (0.32 tokens/s, 2 tokens, context , seed 1234)"
    assert diagnose_lines([TORCH_OOM, report]).stage == "runtime"
