"""The jobs the commands run, one library function each, taking the parsed arguments whole: :mod:`.serve` (``memory
plan`` and ``serve``: plan, export, build the server's command; the inputs every job plans on), :mod:`.replay`
(``buckets replay``), :mod:`.compare` (``memory compare``: a server's log against the plan for its flags),
:mod:`.calibrate` (``memory calibrate``), :mod:`.buckets` (``buckets plan`` and ``check``) and :mod:`.doctor`
(``oom-doctor``). ``cli/`` parses and prints them; ``tests/jobs/`` tests them directly.

A job composes the floors below it (plan, runtimes, replay, buckets); nothing below imports a job."""

__all__: list[str] = []  # import the submodules by name
