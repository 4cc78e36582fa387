"""``vllm-hpu-mm fleet plan``: how many cards, which tensor parallelism and how many replicas serve this traffic at
this request rate within these latency targets, and the deployment that runs it.

For each candidate replica shape (--tensor-parallel-sizes x --max-num-seqs x --max-num-batched-tokens, x
--pipeline-parallel-sizes when given; pipeline stages are also tried, 2 then 4 then 8, when no TP size tried within a
node holds the model; a shape the model's memory or vLLM refuses is listed with why), the replica is planned as serve
plans it (vision buckets, memory split; the runtime's own text buckets during the search unless --text-graph-budget
is given), then the highest Poisson request rate one replica sustains within the targets is found on the replay's
whole latencies (bisection on the rate, --requests sampled requests per probe), then replicas = ceil(rate x (1 +
headroom) / capacity), cards and nodes. The choice: the fewest cards in all (within --cards), ties by the larger
latency margin. Its replica is then planned exactly as serve plans it (the files and environment each replica gets)
and its row re-priced on those buckets. Every capacity and latency carries the time model's interval; the evidence
lines say which inputs are calibrated on your server (a `memory calibrate` profile) and which are public-data
estimates.

--load-profile sizes a day instead of one rate: the shape is chosen at the profile's peak (the cards to book), and
each period gets the replicas its rate needs with the same headroom; the table gives each period's replicas and
card-hours, and the card-hours saved against the peak provisioned all along.

--out DIR writes the deployments: replica/ (the files and environment serve writes for one replica, to be placed at
--replica-dir), dp/node-N.sh (vLLM's own data-parallel launch, one executable script per node; a replica spanning
nodes: its own multi-node server), kubernetes/fleet.yaml (ConfigMap, Deployment, Service; a LeaderWorkerSet in place
of the Deployment when a replica spans nodes), fleet.json, and vllm-hpu-mm.sha256, the record of what it wrote
(sha256sum -c checks it). DIR is new or empty, or holds only a deployment an earlier --out wrote there, unchanged
since (its record says): that one is replaced wholly, none of its files left beside the new ones. Any other file
there, a recorded file changed since, or an input inside DIR is refused (exit 2) before the search, and nothing
is written. --validate reads every node's command and every Kubernetes container's arguments with the installed
vLLM's own parser, and says so.

Exit codes: 0 a fleet meets the targets; 1 none does (the best achievable and what would make it possible are
printed; when no load meets them, each target the closest shape misses, its figure at a light load, and the least
value to loosen it to), the model fits no card count tried, or the server would refuse every request's image
(over its pixel or aspect-ratio limits, or under VLLM_HPU_MM_OVERSIZE_POLICY=reject above the largest vision bucket;
a note counts the requests it refuses when some are served), or the engine would refuse every request (each prompt
of --max-model-len tokens or more); 2 invalid input (a rate <= 0 or below 1e-06, a target
below one step's time, more cards than a cluster holds, a load profile that is not one, an --out over other
files); 3 a bug.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import re
import shlex
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.buckets_replay import request_rate
from vllm_hpu_mm.cli.common import ExitCode, add_model_name, fail, help_text, path_value, print_json, with_input_notes
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs.fleet import (
    HEAD_PLACEHOLDER,
    MAX_CANDIDATES,
    MAX_CARDS,
    MAX_CARDS_PER_NODE,
    MAX_PIPELINE,
    Fleet,
    FleetArgs,
    plan_fleet,
)
from vllm_hpu_mm.jobs.outputs import check_output_folder, replace_folder
from vllm_hpu_mm.jobs.replay import MAX_RATE, MIN_RATE
from vllm_hpu_mm.plan.args import PLAN_OPTIONS, VLLM_FLAGS, SizingArgs, add_options, count_up_to, nonempty, number
from vllm_hpu_mm.plan.fleet import (
    MAX_PERIODS,
    MAX_PROBE_REQUESTS,
    PROBE_REQUESTS,
    Candidate,
    Period,
    Targets,
    parse_profile,
)
from vllm_hpu_mm.plan.validate import MAX_COUNT
from vllm_hpu_mm.replay.latency import latency_dict

__all__ = ["add_parser", "fleet_dict", "fleet_table", "write_out"]

#: The sizing flags the candidates vary (given as lists here) and the planner option the rate replaces.
_VARIED = (
    "tensor_parallel_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "data_parallel_size",
    "pipeline_parallel_size",
)
#: The one cap on the varied lists is the search's: their product, the candidate shapes, at most MAX_CANDIDATES
#: (a list longer than that could never pass it). Said in every list's help.
_IN_ALL = f"at most {MAX_CANDIDATES} candidate shapes in all, the lists multiplied"


def _ints(maximum: int, above: str) -> Callable[[str], tuple[int, ...]]:
    """A list of 1 to :data:`MAX_CANDIDATES` integers, each from 1 to ``maximum`` (the range said by every refusal;
    ``above``: why a larger one is refused)."""
    each = count_up_to(maximum, above)

    def parse(raw: str) -> tuple[int, ...]:
        parts = [p for p in raw.split(",") if p.strip()]
        if not 1 <= len(parts) <= MAX_CANDIDATES:
            raise argparse.ArgumentTypeError(f"{len(parts)} values; accepted: 1 to {MAX_CANDIDATES} integers from 1 "
                                             f"to {maximum:,} joined by commas ({_IN_ALL})")  # fmt: skip
        return tuple(each(p.strip()) for p in parts)

    return parse


def _ms(raw: str) -> float:
    value = number(raw)
    if not 0 < value < 1e7:
        raise argparse.ArgumentTypeError(f"{raw!r} is out of range; accepted: milliseconds above 0")
    return value / 1000


_cards = count_up_to(MAX_CARDS, "more cards than a cluster holds")
_per_node = count_up_to(MAX_CARDS_PER_NODE, "more cards than one node holds")
_requests = count_up_to(MAX_PROBE_REQUESTS, "too many requests per probe")
#: The candidates' sizing flags are counts as vLLM's own (validate.MAX_COUNT); pipeline sizes have the fleet's cap.
_counts = _ints(MAX_COUNT, "too large (vLLM keeps counts in int32)")
_pipelines = _ints(MAX_PIPELINE, "more pipeline stages than the fleet plans")


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long for a path: periods inline
        return False


def _load_profile(raw: str) -> tuple[Period, ...]:
    """``SECONDS:RATE,...`` or a CSV file of periods (see :func:`~vllm_hpu_mm.plan.fleet.parse_profile`)."""
    path = Path(raw)
    try:
        if ":" not in raw or _is_file(path):
            try:
                with path.open(encoding="utf-8") as f:
                    text = f.read((1 << 20) + 1)
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{raw[:60]!r}: not SECONDS:RATE periods nor a readable CSV file ({exc}); accepted: "
                                  "e.g. 28800:2,36000:12 or a CSV with the header seconds,rate") from None  # fmt: skip
            return parse_profile(raw, text)
        return parse_profile(raw)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _headroom(raw: str) -> float:
    value = number(raw)
    if not 0 <= value <= 10:
        raise argparse.ArgumentTypeError(f"{raw!r} is out of range; accepted: 0 to 10 (0.2 = 20% spare)")
    return value


#: A Service's name (Kubernetes' DNS-1035 label: the tightest rule among the objects named after --name).
_DNS_1035 = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def _kubernetes_name(raw: str) -> str:
    """--name: the Deployment's or LeaderWorkerSet's and the Service's name, which Kubernetes refuses unless it is a
    DNS-1035 label (``kubectl apply`` would fail on the manifests written)."""
    if not _DNS_1035.fullmatch(raw):
        raise argparse.ArgumentTypeError(f"{raw[:80]!r} is not a name Kubernetes takes for a Service; accepted: at "
                                         "most 63 lower-case letters, digits and '-', starting with a letter and "
                                         "ending with a letter or digit (DNS-1035), e.g. vllm-qwen")  # fmt: skip
    return raw


#: One label of an RFC 1123 host name: letters, digits and '-', 1 to 63, neither end a '-'.
_HOST_LABEL = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?")


def _head_address(raw: str) -> str:
    """--head-address: written as vLLM's --data-parallel-address, which vLLM joins into ``tcp://ADDR:PORT``
    (vllm/utils/network_utils.py ``get_tcp_uri``, vLLM 0.32) and takes unchecked: anything but a host name or an IP
    address (a '; touch x', a URL) would be written into every node script and only fail at launch."""
    if raw == HEAD_PLACEHOLDER:
        return raw
    try:
        ipaddress.ip_address(raw)
        return raw
    except ValueError:
        pass
    name = raw[:-1] if raw.endswith(".") else raw
    labels = name.split(".")
    # a dotted all-numeric name ("10.0.0.256") is a mistyped IPv4 address, never a host name (RFC 1123 2.1)
    if len(name) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        raise argparse.ArgumentTypeError(
            f"{raw[:80]!r} is not a host name or IP address; accepted: an RFC 1123 host name (letters, digits, '-' "
            f"and '.', e.g. head-0.example.com), an IPv4 or IPv6 address (10.0.0.1, fd00::1), or {HEAD_PLACEHOLDER}"
        )
    return raw


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fleet = subparsers.add_parser(
        "fleet", help="size a fleet of replicas for a request rate and latency targets", description=help_text(__doc__)
    )
    sub = fleet.add_subparsers(dest="fleet_command", metavar="ACTION")
    sub.required = True
    p = sub.add_parser(
        "plan",
        help="cards, TP and replicas for a rate within latency targets; the deployments",
        description=help_text(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(p, [o for o in VLLM_FLAGS if o.field not in _VARIED])
    add_options(p, [o for o in PLAN_OPTIONS if o.field != "concurrency"])
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument(
        "--request-rate",
        type=request_rate,
        metavar="R",
        help=f"the target rate: Poisson arrivals at R requests/s over the whole fleet ({MIN_RATE:g} <= R <= "
        f"{MAX_RATE:,.0f})",
    )
    load.add_argument(
        "--load-profile",
        type=_load_profile,
        metavar="S:R,...|CSV",
        help="a rate over the day: R requests/s for S seconds, period after period (e.g. 28800:2,36000:12,21600:6), "
        f"or a CSV file with the header seconds,rate (optionally period, a name); at most {MAX_PERIODS} periods, a "
        "week in all; sized at its peak, each period's replicas printed",
    )
    p.add_argument("--ttft-p99", type=_ms, required=True, metavar="MS", help="p99 time to first token target, ms")
    p.add_argument("--tpot-p99", type=_ms, required=True, metavar="MS", help="p99 time per output token target, ms")
    p.add_argument("--ttft-p50", type=_ms, metavar="MS", help="p50 time to first token target, ms (default: none)")
    p.add_argument("--tpot-p50", type=_ms, metavar="MS", help="p50 time per output token target, ms (default: none)")
    p.add_argument("--e2e-p99", type=_ms, metavar="MS", help="p99 end-to-end latency target, ms (default: none)")
    p.add_argument("--cards", type=_cards, metavar="N", help="cards available (default: no limit)")
    p.add_argument(
        "--cards-per-node",
        type=_per_node,
        default=8,
        metavar="N",
        help="cards in one node (default 8: a Gaudi node); a replica spans nodes only by pipeline stages",
    )
    p.add_argument(
        "--headroom", type=_headroom, default=0.2, metavar="H", help="spare capacity over the rate (default 0.2: 20%%)"
    )
    p.add_argument(
        "--tensor-parallel-sizes",
        type=_counts,
        default=(1, 2, 4, 8),
        metavar="N,...",
        help=f"TP sizes tried (default 1,2,4,8; those the model's memory or heads refuse are listed; {_IN_ALL})",
    )
    p.add_argument(
        "--max-num-seqs",
        dest="fleet_max_num_seqs",
        type=_counts,
        default=(64, 256),
        metavar="N,...",
        help=f"max_num_seqs values tried (default 64,256; {_IN_ALL})",
    )
    p.add_argument(
        "--max-num-batched-tokens",
        dest="fleet_max_num_batched_tokens",
        type=_counts,
        default=(),
        metavar="N,...",
        help="max_num_batched_tokens values tried (default: the runtime's own for each shape, as memory plan "
        "resolves it, e.g. vllm-fork max(--max-model-len, 2048) without chunked prefill, vLLM 0.32 by card; "
        f"{_IN_ALL})",
    )
    p.add_argument(
        "--pipeline-parallel-sizes",
        type=_pipelines,
        default=(),
        metavar="N,...",
        help=f"pipeline sizes tried, each 1 to {MAX_PIPELINE} (default: 1, then 2, 4, 8 only where no TP size within "
        f"a node holds the model; {_IN_ALL})",
    )
    p.add_argument(
        "--from-metrics",
        type=path_value,
        metavar="URL|FILE",
        help="traffic from a running server's /metrics (or a saved exposition), added to --sizes",
    )
    add_model_name(p)
    p.add_argument(
        "--requests",
        type=_requests,
        default=PROBE_REQUESTS,
        metavar="N",
        help=f"requests sampled per probe rate and seed (default {PROBE_REQUESTS}; 2 seeds)",
    )
    p.add_argument(
        "--out",
        type=path_value,
        metavar="DIR",
        help="write the deployments there: a new or empty folder, or one holding an earlier deployment of --out, "
        "replaced wholly (see above)",
    )
    p.add_argument(
        "--replica-dir",
        type=path_value,
        default="/etc/vllm-hpu-mm",
        metavar="DIR",
        help="where each replica finds its files (default /etc/vllm-hpu-mm)",
    )
    p.add_argument("--name", default="vllm", type=_kubernetes_name, help="the Kubernetes objects' name (default vllm)")
    p.add_argument(
        "--image",
        type=nonempty("a container image"),
        help="the container image (default: the planned runtime's: vllm-gaudi:latest on Gaudi, "
        "vllm/vllm-openai:v0.32.0 for vLLM CUDA; none known for vllm-cpu, so pass it)",
    )
    p.add_argument(
        "--head-address",
        default=HEAD_PLACEHOLDER,
        type=_head_address,
        metavar="ADDR",
        help="the data-parallel head node's address (default: the placeholder HEAD_NODE_IP)",
    )
    p.add_argument(
        "--validate",
        action="store_true",
        help="read every node's command and every Kubernetes container's arguments with the installed vLLM's own "
        "parser (a line says what was read; a refusal exits 2)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.set_defaults(func=run)


def _candidate_dict(c: Candidate, cards: int | None) -> dict[str, Any]:
    cap = c.capacity
    rate_range = cap.rate_range() if cap is not None else None
    return {
        "tensor_parallel_size": c.shape.tensor_parallel_size,
        "pipeline_parallel_size": c.shape.pipeline_parallel_size,
        "max_num_seqs": c.shape.batch.max_num_seqs,
        "max_num_batched_tokens": c.shape.batch.max_num_batched_tokens,
        "cards_per_replica": c.cards_per_replica,
        "capacity_per_replica": None if cap is None else round(cap.rate, 4),
        "capacity_range": None if rate_range is None else [round(r, 4) for r in rate_range],
        "saturation_per_replica": None if cap is None else round(cap.saturation, 4),
        "limited_by": None if cap is None else list(cap.limited_by),
        "probes": None if cap is None else cap.probes,
        "replicas": c.replicas,
        "replicas_if_steps_slow": c.replicas_if_slow or None,
        "total_cards": c.total_cards,
        "nodes": c.nodes,
        "nodes_per_replica": c.nodes_per_replica,
        "meets": c.meets,
        # a shape that meets the targets on more cards than --cards gives is no choice (the table says so too)
        "within_cards": c.meets and (cards is None or c.total_cards <= cards),
        "latency_at_target_rate": None if c.latency is None else latency_dict(c.latency),
        # a shape that meets the targets at no load: the figures it reaches at the lightest load probed
        "latency_at_light_load": latency_dict(cap.latency) if cap is not None and cap.rate <= 0 else None,
        "margin": None if c.latency is None else round(c.margin, 4),
        "warmup_s": None if c.warmup_s is None else round(c.warmup_s, 1),
        "why_not": c.why_not or None,
        "text_buckets": c.buckets or None,
    }


def fleet_dict(f: Fleet) -> dict[str, Any]:
    """The fleet as one JSON object (latencies in ms, as vllm bench saves them)."""
    chosen = f.chosen
    out: dict[str, Any] = {
        "model": f.model,
        "device": f.device,
        "request_rate": f.rate,
        "traffic": f.traffic,
        "targets_ms": {n: round(1000 * v, 3) for n, v in f.targets.items()},
        "headroom": f.headroom,
        "cards_available": f.cards,
        "cards_per_node": f.cards_per_node,
        "candidates": [_candidate_dict(c, f.cards) for c in f.candidates],
        "chosen": None if chosen is None else _candidate_dict(chosen, f.cards),
        "best_achievable": None if f.best is None else _candidate_dict(f.best, f.cards),
        "reason": f.reason,
        "evidence": f.evidence,
        "notes": list(f.notes),
        "search_seconds": round(f.seconds, 1),
    }
    if f.day is not None:
        day = f.day
        out["load_profile"] = {
            "periods": [
                {
                    "period": s.period.name,
                    "seconds": s.period.seconds,
                    "request_rate": s.period.rate,
                    "replicas": s.replicas,
                    "cards": s.cards,
                    "card_hours": round(s.card_hours, 3),
                }
                for s in day.periods
            ],
            "cards_to_book": day.peak_cards,
            "card_hours": round(day.card_hours, 3),
            "card_hours_at_peak_all_along": round(day.peak_card_hours, 3),
            "card_hours_saved": round(day.saved_card_hours, 3),
        }
    if f.deploy is not None:
        d = f.deploy
        out["deployments"] = {
            "replica_dir": d.replica_dir,
            "environment": d.env,
            "files": sorted(d.files),
            "data_parallel": [
                {
                    "node": c.node,
                    "start_rank": c.start,
                    "local": c.local,
                    "command": list(c.argv),
                    "command_line": shlex.join(c.argv),
                    "node_rank": c.rank,
                }
                for c in d.commands
            ],
            "kubernetes": list(d.manifests),
        }
    return out


#: The table's column for each optional latency target (the p99 TTFT and TPOT columns are always there).
_COLUMNS = {"ttft_p50": "TTFT p50", "tpot_p50": "TPOT p50", "e2e_p99": "e2e p99"}


def _fmt_ms(x: float) -> str:
    return f"{1000 * x:.0f}" if x >= 0.1 else f"{1000 * x:.1f}"


#: The verdict column's width: a longer reason is cut at a word and given whole in a note under the table.
_VERDICT_WIDTH = 70


def _verdict_cell(why: str, notes: list[str]) -> str:
    """``why`` as the verdict column shows it: whole where it fits, else its start and the number of the note under
    the table that gives it whole (a refusal's figures and accepted values are at its end)."""
    if len(why) <= _VERDICT_WIDTH:
        return why
    if why not in notes:
        notes.append(why)
    mark = f" ... [{notes.index(why) + 1}]"
    return why[: _VERDICT_WIDTH - len(mark)].rsplit(" ", 1)[0] + mark


def _meets_cell(c: Candidate, cards: int | None) -> str:
    """A shape that meets the targets, unless it needs more cards than ``--cards`` gives: then it is no choice."""
    return "meets" if cards is None or c.total_cards <= cards else f"meets on {c.total_cards} > {cards} cards"


def fleet_table(f: Fleet) -> str:
    """The candidates, the choice and the evidence, as text."""
    t = f.targets
    lines = [
        f"fleet plan: {f.model} on {f.device}, {f.rate:g} requests/s (Poisson"
        + (f"; the peak of a load profile of {len(f.profile)} periods" if f.profile else "")
        + f"), headroom {f.headroom:.0%}; "
        "targets "
        + ", ".join(f"{n.replace('_', ' ')} {1000 * v:g} ms" for n, v in t.items())
        + (f"; {f.cards} cards available" if f.cards else "")
        + f"; {f.cards_per_node} cards per node",
        "",
    ]
    # the optional targets set get their own columns: a row that misses one shows by how much
    optional = [n for n, _ in t.items() if n in _COLUMNS]
    header = (
        "shape",
        "cards/rep",
        "capacity/rep req/s",
        "replicas",
        "cards",
        "nodes",
        "TTFT p99 ms",
        "TPOT p99 ms",
        *(f"{_COLUMNS[n]} ms" for n in optional),
        "warm-up s",
        "text buckets",
        "verdict",
    )
    rows = [header]
    notes: list[str] = []
    for c in f.candidates:
        cap = c.capacity
        if cap is None:
            rows.append((c.shape.label, str(c.cards_per_replica), *["-"] * (len(header) - 3),
                         _verdict_cell(c.why_not, notes)))  # fmt: skip
            continue
        rng = cap.rate_range()
        if cap.rate <= 0:  # no interval to bracket: the search found no rate at all
            capacity = "0 (no load meets)"
        else:
            capacity = f"{cap.rate:.3g}" + (f" [{rng[0]:.3g}-{rng[1]:.3g}]" if rng else " (unbounded)")
        lat = c.latency or cap.latency  # none sized: the latencies at the lightest load probed
        verdict = (
            "chosen"
            if f.chosen is not None and c.shape == f.chosen.shape
            else (_meets_cell(c, f.cards) if c.meets else _verdict_cell(c.why_not, notes))
        )
        warm = "-" if c.warmup_s is None else f"{c.warmup_s:.0f}"
        rows.append(
            (
                c.shape.label,
                str(c.cards_per_replica),
                capacity,
                f"{c.replicas} ({c.replicas_if_slow})" if c.replicas and c.replicas_if_slow else str(c.replicas or "-"),
                str(c.total_cards or "-"),
                str(c.nodes or "-"),
                _fmt_ms(lat.ttft[2]) if lat else "-",
                _fmt_ms(lat.tpot[2]) if lat else "-",
                *(_fmt_ms(t.value(lat, n)) if lat else "-" for n in optional),
                warm,
                c.buckets or "-",
                verdict,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines += [f"[{k}] {why}" for k, why in enumerate(notes, 1)]
    lines.append("")
    lines.append(("choice: " if f.chosen is not None else "no fleet meets the targets: ") + f.reason)
    lines += _day_lines(f)
    some = next((c.capacity for c in f.candidates if c.capacity is not None), None)
    if some is not None and some.interval is None:  # no bracket is printed: none is described (r21fleet 14's note)
        lines.append(f"interval: every latency unbounded, so capacity and replicas carry no range ({some.evidence})")
    elif some is not None:
        iv = f"±{some.interval:.0%}"
        lines.append(
            f"interval: every latency {iv}; capacity in brackets: the search again with every step {iv} "
            f"slower and faster; replicas in parentheses: with every step slower ({some.evidence})"
        )
    lines += [f"evidence, {k.replace('_', ' ')}: {v}" for k, v in f.evidence.items()]
    if f.traffic:  # as memory plan, serve and buckets replay describe it (a folder's unreadable files named)
        lines.append(f"traffic: {f.traffic}")
    lines += [f"note: {n}" for n in f.notes]
    lines.append(f"search: {f.seconds:.1f} s")
    return "\n".join(lines)


def _day_lines(f: Fleet) -> list[str]:
    """The load profile's periods on the chosen shape, and the card-hours saved against the peak all along."""
    day, chosen = f.day, f.chosen
    if day is None or chosen is None:
        return []
    rows = [("period", "seconds", "req/s", "replicas", "cards", "card-hours")]
    rows += [(s.period.name, f"{s.period.seconds:g}", f"{s.period.rate:g}", str(s.replicas), str(s.cards),
              f"{s.card_hours:.1f}") for s in day.periods]  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    hours = sum(s.period.seconds for s in day.periods) / 3600
    saved = day.saved_card_hours / day.peak_card_hours if day.peak_card_hours else 0.0
    return [
        "",
        f"load profile on {chosen.shape.label} ({chosen.capacity.rate if chosen.capacity else 0:.3g} req/s per "
        f"replica, headroom {f.headroom:.0%}), {hours:g} h:",
        *("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows),
        f"cards to book: {day.peak_cards} (the peak's); card-hours {day.card_hours:.1f} against "
        f"{day.peak_card_hours:.1f} with the peak all along: {day.saved_card_hours:.1f} saved ({saved:.0%}), if "
        "replicas start a warm-up ahead of each period's rise",
    ]


def answer(f: Fleet, validated: str | None = None) -> dict[str, Any]:
    """The whole answer, as ``--json`` prints it and ``fleet.json`` holds it: the fleet and, under ``--validate``,
    what vLLM's own parser read."""
    return fleet_dict(f) | ({"validated": validated} if validated is not None else {})


def write_out(
    f: Fleet, out: str, inputs: Iterable[tuple[str, str | None]] = (), validated: str | None = None
) -> list[Path]:
    """The deployments in the folder ``out`` (see the module docstring), an earlier deployment there replaced wholly
    (:func:`~vllm_hpu_mm.jobs.outputs.replace_folder`); the paths written."""
    d = f.deploy
    if d is None:
        return []
    files = {"fleet.json": json.dumps(with_input_notes(answer(f, validated)), indent=2, default=str) + "\n"}
    for name, text in d.files.items():
        files[f"replica/{name}"] = text
    if d.env:  # a runtime given no environment (vLLM CUDA) gets no empty file, as its manifests hold no ConfigMap
        files["replica/replica.env"] = d.env_file()
    scripts = {f"dp/node-{c.node}.sh": c.script(d.env) for c in d.commands}
    files.update(scripts)
    files["kubernetes/fleet.yaml"] = d.manifests_yaml()
    return replace_folder(out, "--out", files, inputs, executable=scripts)


def validate_commands(f: Fleet) -> str:
    """Every node's command and every Kubernetes container's arguments read by the installed vLLM's own parser (as
    ``serve --validate``); the line that says what was read (a refusal: one-line :class:`ConfigError`)."""
    from vllm_hpu_mm.cli.serve import INSTALL_HINT
    from vllm_hpu_mm.cli.serve_args import check_with_vllm, vllm_installed, vllm_server_parser
    from vllm_hpu_mm.plan.fleet_deploy import LWS_WORKER_ENV, served_args

    if f.deploy is None:
        return "validated: nothing (no fleet meets the targets, so no command was written)"
    if not vllm_installed():
        raise ConfigError(f"--validate needs vLLM installed in this Python: {INSTALL_HINT}")
    parser, table = vllm_server_parser()
    for c in f.deploy.commands:
        check_with_vllm(parser, list(c.argv[2:]), None)
    pods = served_args(f.deploy.manifests)
    for args in pods:
        check_with_vllm(parser, list(args), None)
    lws = any(d.get("kind") == "LeaderWorkerSet" for d in f.deploy.manifests)
    expanded = (" (LeaderWorkerSet's $(...) references as Kubernetes expands them in a worker: "
                + ", ".join(f"{k}={v}" for k, v in LWS_WORKER_ENV.items()) + ")") if lws else ""  # fmt: skip
    return (f"validated: vLLM {table.version}'s own server parser accepted every node's command "
            f"({len(f.deploy.commands)}, dp/node-N.sh) and every Kubernetes container's arguments ({len(pods)}, "
            f"kubernetes/fleet.yaml){expanded}")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    inputs = [(f"--{n.replace('_', '-')}", getattr(args, n)) for n in ("sizes", "from_metrics", "profile", "model")]
    if args.out is not None:  # before the search: a folder that is not ours is refused before minutes are spent
        check_output_folder(args.out, "--out", inputs)
    targets = Targets(args.ttft_p99, args.tpot_p99, args.ttft_p50, args.tpot_p50, args.e2e_p99)
    profile = args.load_profile or ()
    fleet_args = FleetArgs(
        args.request_rate if not profile else max(p.rate for p in profile),
        targets,
        args.headroom,
        args.cards,
        args.cards_per_node,
        args.tensor_parallel_sizes,
        args.fleet_max_num_seqs,
        args.fleet_max_num_batched_tokens,
        args.pipeline_parallel_sizes,
        profile,
        requests=args.requests,
        from_metrics=args.from_metrics,
        model_name=args.model_name,
        replica_dir=args.replica_dir,
        name=args.name,
        image=args.image,
        head_address=args.head_address,
    )
    fleet = plan_fleet(SizingArgs.from_namespace(args), fleet_args, envs.load(), envs.runtime_environ())
    validated = validate_commands(fleet) if args.validate else None
    written = write_out(fleet, args.out, inputs, validated) if args.out is not None and fleet.chosen is not None else []
    if args.json:
        print_json(answer(fleet, validated))
    else:
        print(fleet_table(fleet))
        if fleet.deploy is not None:
            for c in fleet.deploy.commands:
                print(f"node {c.node}: {shlex.join(c.argv)}")
        if validated is not None:
            print(validated)
        for path in written:
            print(f"file: {path}")
    if fleet.chosen is None:
        return fail(f"no fleet meets the targets: {fleet.reason}", ExitCode.NEGATIVE)
    return int(ExitCode.OK)
