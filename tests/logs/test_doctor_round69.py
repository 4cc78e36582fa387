"""Classes from the partial held-out rounds 66-69 (issue 34), read in any program: a device allocation refused by
Habana's synapse helper with its size first, and an out-of-memory warning that says what the program was working on
when memory ran out. Lines composed after the public logs under tests/data/logs/heldout_round67 and 68."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines


def test_habanas_workspace_allocation_of_a_size_refused_is_the_devices_oom() -> None:
    # HabanaAI/Model-References #13: the runtime's own words, nothing said of when
    d = diagnose_lines(
        ["RuntimeError: FATAL ERROR :: MODULE:SYNHELPER workspace Allocation of size ::14493741952 failed"]
    )
    assert (d.oom, d.stage, d.backend) == (True, "unknown", "hpu")


def test_an_allocation_of_a_size_that_went_through_is_no_failure() -> None:
    d = diagnose_lines(["INFO workspace Allocation of size ::14493741952 done"])
    assert not d.oom


def test_running_out_of_memory_while_decoding_is_serving_even_after_a_model_load() -> None:
    # lllyasviel/Fooocus #700: a model swapped in mid-run ("Loading 1 new model"), then the decode of the sampled image
    lines = [
        "[Sampler] Fooocus sampler is activated.",
        "Loading 1 new model",
        "loading in lowvram mode 1027.2795219421387",
        "Warning: Ran out of memory when regular VAE decoding, retrying with tiled VAE decoding.",
    ]
    d = diagnose_lines(lines)
    assert (d.oom, d.stage) == (True, "runtime")


def test_running_out_of_memory_while_loading_the_model_names_no_work() -> None:
    d = diagnose_lines(["Loading 1 new model", "Warning: Ran out of memory when loading the model weights, giving up."])
    assert d.stage != "runtime"
