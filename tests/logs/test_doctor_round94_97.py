"""What rounds 94-97 (development data since) saw the doctor miss (issue 34), each a class any program's log can show,
pinned on lines composed after the public logs under tests/data/logs/heldout_round94, heldout_round71 and
heldout_round61:

- The statement a user ran, quoted above its error, set apart from it by blank lines (the error maybe marked up as a
  comment: ``#XlaRuntimeError: ...``), is the call that raised it; a call that builds a model or a pipeline from a
  model's reference (a ``from_`` factory, transformers' ``pipeline(...)``, a pipeline's class made) is start-up.
  Calling what was built runs it; prose and a logger's record are no statement."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

TORCH_OOM = (
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 47.46 GiB total capacity; 148.00 MiB "
    "already allocated; 22.31 MiB free; 148.00 MiB reserved in total by PyTorch)"
)
XLA_OOM = (
    "XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 4.39G. That was not "
    "possible. There are 2.30G free.; (0x0x0_HBM0)"
)


def _stage(lines: list[str]) -> tuple[bool, str]:
    d = diagnose_lines(lines)
    return d.oom, d.stage


# --- a statement building a model, set apart from its error ---------------------------------------------------------


def test_a_statement_set_apart_from_its_error_by_blank_lines_is_the_call_that_raised_it() -> None:
    loading = 'model = AutoModelForCausalLM.from_pretrained("gpt2").to("cuda")'
    assert _stage([loading, "", TORCH_OOM]) == (True, "startup")
    assert _stage([loading, "", "", TORCH_OOM]) == (True, "startup")
    generating = "outputs = model.generate(**inputs, max_new_tokens=256)"
    assert _stage([generating, "", TORCH_OOM]) == (True, "runtime")


def test_a_pipeline_built_by_transformers_factory_is_start_up() -> None:
    # huggingface/transformers #19947: the script's one statement, a blank line, then the error
    statement = "generator = pipeline('text-generation', model='gpt2',device=0)"
    assert _stage(["from transformers import pipeline, set_seed", "", statement, "", TORCH_OOM]) == (True, "startup")
    assert _stage([statement, TORCH_OOM]) == (True, "startup")


def test_a_factory_building_a_model_above_its_marked_up_error_is_start_up() -> None:
    # keras-team/keras-nlp via huggingface/diffusers #8358: the error pasted as a comment under the call
    statement = 'keras_nlp.models.GemmaCausalLM.from_preset("hf://google/gemma-2-27b-it")'
    assert _stage([statement, "", f"#{XLA_OOM}"]) == (True, "startup")
    assert _stage([statement, f"#{XLA_OOM}"]) == (True, "startup")
    single_file = 'pipe = StableDiffusionXLPipeline.from_single_file("sdxl.safetensors")  # the checkpoint'
    assert _stage([single_file, "", f"**{TORCH_OOM}**"]) == (True, "startup")


def test_a_pipeline_class_made_on_a_source_line_is_start_up() -> None:
    # openvinotoolkit/openvino #34345: OpenVINO GenAI's pipeline loads its models when it is made
    lines = [
        "Traceback (most recent call last):",
        '  File "/app/text2image.py", line 40, in <module>',
        "    main()",
        '  File "/app/text2image.py", line 17, in main',
        "    pipe = openvino_genai.Text2ImagePipeline(args.model_dir, device)",
        TORCH_OOM,
    ]
    assert _stage(lines) == (True, "startup")


def test_running_what_was_built_is_not_start_up() -> None:
    assert _stage(['image = pipe("a rose flower").images[0]', "", TORCH_OOM]) == (True, "unknown")
    assert _stage(['out = generator("Hello, I am", max_length=30)', "", TORCH_OOM]) == (True, "unknown")
    # a pipeline called: its __call__ frame, in a module named for it
    called = [
        "Traceback (most recent call last):",
        '  File "/app/run.py", line 9, in <module>',
        '    images = pipe("a rose flower").images',
        '  File "/x/site-packages/app/pipeline.py", line 80, in __call__',
        "    latents = self.unet(latents, t)",
        TORCH_OOM,
    ]
    assert _stage(called)[1] != "startup"


def test_prose_a_record_or_a_distant_line_is_no_statement() -> None:
    building = "generator = pipeline('text-generation', model='gpt2',device=0)"
    assert _stage(["pipeline(...) fails with:", "", TORCH_OOM]) == (True, "unknown")
    assert _stage(["model = AutoModel.from_pretrained(", "", TORCH_OOM]) == (True, "unknown")  # a call left open
    assert _stage([f"2024-05-01 10:00:00 INFO main.py:12] {building}", "", TORCH_OOM]) == (True, "unknown")
    assert _stage([building, "", "", "", "", TORCH_OOM]) == (True, "unknown")
    # the error must be an exception line: a message of other words under a statement is not its error
    assert _stage([building, "", "CUDA out of memory. Tried to allocate 20.00 MiB"])[1] != "startup"


def test_a_logger_named_for_a_pipeline_is_no_call_that_builds_one() -> None:
    record = f"2024-05-01 10:00:00,123 - app.pipeline - ERROR - {TORCH_OOM}"
    assert _stage([record]) == (True, "unknown")
