"""Classes stop 54 found the doctor leaving undecided in the unseen rounds of stops 52-53 (issue 34; rounds 115, 126,
127 and 139, development data once scored), each pinned on lines composed after the public logs (not loaded):

- IPython's arrow at a frame's current line is drawn as long as the line numbers need ("---->  5 model = ..."): the
  call on it is a frame like any other, so a notebook cell that loads a model is start-up.
- A source line that concatenates new keys or values onto the model's past ones (or indexes the past) shows a sequence
  decoding: a generation was under way.
- A start-up phase line ("Loading <model>...") followed by an elision and then the failure is the failure's phase:
  what the excerpt left out after a loading line is read as the loading's.
- A logger's record from a function named for the request it sends ("safe_request") is serving."""

from __future__ import annotations

from tests.support.logs import verdict


def test_a_notebook_cell_that_loads_a_model_under_ipython_s_long_arrow_is_start_up() -> None:
    lines = ["---------------------------------------------------------------------------",
             "OutOfMemoryError                          Traceback (most recent call last)",
             "Cell In[5], line 5", '      2 model_name = "mistralai/Mistral-7B-Instruct-v0.3"',
             '----> 5 model = inseq.load_model(model_name, "integrated_gradients")',
             "      7 out = model.attribute(", "..."]  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_the_arrow_s_length_does_not_matter() -> None:
    for arrow in ("-->", "--->", "---->", "------>"):
        lines = ["OutOfMemoryError                          Traceback (most recent call last)",
                 "Cell In[5], line 5", f"{arrow} 5 model = AutoModel.from_pretrained(name)", "..."]  # fmt: skip
        assert verdict(lines)[0] == "startup", arrow


def test_concatenating_onto_the_past_values_is_decoding() -> None:
    lines = ['  File "/opt/conda/lib/python3.9/site-packages/text_generation_server/models/custom_modeling/'
             'bloom_modeling.py", line 306, in compute_attention',
             "    value_layer = torch.cat((past_value, value_layer), dim=1)",
             "torch.cuda.OutOfMemoryError: Allocation on device 0 would exceed allowed memory."]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_a_layer_that_only_returns_its_past_says_nothing() -> None:
    lines = ['  File "/srv/app/modeling.py", line 88, in forward',
             "    hidden_states, attn_weights, past_key_values = self.self_attn(",
             "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"]  # fmt: skip
    assert verdict(lines)[0] == "unknown"


def test_a_loading_line_then_an_elision_then_the_failure_is_start_up() -> None:
    lines = ["Loading vicuna-13b-GPTQ-4bit-128g...", "...",
             "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 34.00 MiB (GPU 0; 4.00 GiB total "
             "capacity; 3.33 GiB already allocated; 0 bytes free; 3.45 GiB reserved in total by PyTorch)"]  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_a_kv_cache_line_then_an_elision_leaves_the_later_phase_open() -> None:
    lines = ["INFO 12-15 10:18:11 uniproc_executor.py:64] # GPU blocks: 31207", "...",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 322.00 MiB. GPU 0 has a total capacity "
             "of 79.10 GiB of which 249.88 MiB is free."]  # fmt: skip
    assert verdict(lines)[0] == "unknown"


def test_a_record_from_a_function_named_for_its_request_is_serving() -> None:
    lines = ["  0%|          | 0/5 [00:00<?, ?it/s]2024-04-03 14:51:50.480 | WARNING  | src.llms.base:safe_request:43 "
             "- OutOfMemoryError('CUDA out of memory. Tried to allocate 104.00 MiB (GPU 1; 7.92 GiB total capacity; "
             "7.74 GiB already allocated; 7.69 MiB free)')"]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_a_function_that_opens_with_request_names_what_it_asks_for_not_a_request() -> None:
    lines = ['  File "/srv/app/pool.py", line 12, in request_memory',
             "    buf = torch.empty(n, device='cuda')",
             "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]  # fmt: skip
    assert verdict(lines)[0] == "unknown"
    handled = [lines[0].replace("request_memory", "handle_request"), *lines[1:]]
    assert verdict(handled)[0] == "runtime"
