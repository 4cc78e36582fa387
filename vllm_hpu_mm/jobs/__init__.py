"""The jobs the commands run, one library function each, taking the parsed arguments whole: :mod:`.serve` (``memory
plan`` and ``serve``: plan, export, build the server's command), :mod:`.replay` (``buckets replay``) and
:mod:`.compare` (``memory compare``: a server's log against the plan for its flags). The vision
bucket jobs (``buckets plan`` and ``check``) are :mod:`vllm_hpu_mm.buckets.job`. ``cli/`` parses and prints them.

A job composes the floors below it (plan, runtimes, replay, buckets); nothing below imports a job."""

__all__: list[str] = []  # import the submodules by name
