from vllm_hpu_mm.cli.main import entry

entry()
