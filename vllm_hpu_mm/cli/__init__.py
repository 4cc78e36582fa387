"""The ``vllm-hpu-mm`` command: one module per subcommand, each with ``add_parser`` and ``run``.

Exit codes (:class:`ExitCode`): 0 success; 1 the command ran but its verdict is negative (a plan that does not fit,
an OOM found by the doctor); 2 invalid input or configuration (one clear line on stderr).
"""

from vllm_hpu_mm import envs

__all__: list[str] = []  # each subcommand module is imported by name (cli.main)

envs.single_thread_blas()  # before any subcommand imports numpy
