"""A fleet's deployments, for engines that exist: vLLM's own data-parallel launch (one command per node: the head
runs the API server and its local engines, the others run ``--headless`` from their start rank; vLLM 0.32
``entrypoints/cli/serve.py``) and Kubernetes manifests (a Deployment of one replica per pod with the accelerator
resource, the plan's environment, the bucket file as a ConfigMap mounted where the environment names it, startup,
readiness and liveness probes on ``/health``, Prometheus scrape annotations, and a Service). Each replica gets the
files and environment ``serve`` would write for it: they are passed in, never rebuilt here.

A replica whose cards (TP x PP) span nodes is one vLLM server over several nodes (vLLM 0.32's multi-node
multiprocessing: ``--nnodes``, ``--node-rank``, ``--master-addr``; every node but the first ``--headless``), each
replica its own server behind a load balancer rather than data-parallel ranks of one; on Kubernetes, a
LeaderWorkerSet (leaderworkerset.x-k8s.io/v1, kubernetes-sigs/lws) of one group per replica, a pod per node, the
leader serving the API and the Service selecting the leaders."""

from __future__ import annotations

import dataclasses
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

import yaml

from vllm_hpu_mm.plan.fleet import placement

__all__ = [
    "DP_RPC_PORT",
    "LWS_API",
    "LWS_WORKER_ENV",
    "MASTER_PORT",
    "PORT",
    "Deployments",
    "NodeCommand",
    "deployments",
    "dp_commands",
    "manifests",
]

#: The port each replica's API server listens on, and vLLM's default data-parallel RPC port.
PORT = 8000
DP_RPC_PORT = 13345
#: vLLM's default port of a multi-node replica's torch.distributed group (``--master-port``).
MASTER_PORT = 29501
LWS_API = "leaderworkerset.x-k8s.io/v1"
#: The label LWS puts on every pod of a set (its name), and the one we put on the leaders.
_LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
#: The device resource each device family is scheduled by (its device plugin's name).
_RESOURCES = {"gaudi": "habana.ai/gaudi", "h100": "nvidia.com/gpu", "h200": "nvidia.com/gpu"}
#: Seconds between startup probes; the startup budget covers the warm-up estimate twice, at least ten minutes.
_PROBE_PERIOD_S = 10
_MIN_STARTUP_S = 600


def _text(dumper: Any, data: str) -> Any:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


#: Plain YAML as a person writes it: no anchors for repeated labels, files as literal blocks.
_Dumper: Any = type("_Dumper", (yaml.SafeDumper,), {"ignore_aliases": lambda self, data: True})
_Dumper.add_representer(str, _text)


@dataclasses.dataclass(frozen=True)
class NodeCommand:
    """One node's launch: its data-parallel ranks (``start`` .. ``start + local - 1``) and the command; for a
    replica spanning nodes, ``start`` is the replica and ``rank`` the node's rank within it."""

    node: int
    start: int
    local: int
    argv: tuple[str, ...]
    rank: int | None = None

    def script(self, env: Mapping[str, str]) -> str:
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
        what = (
            f"data-parallel ranks {self.start}..{self.start + self.local - 1}"
            if self.rank is None
            else f"replica {self.start}, node rank {self.rank}"
        )
        return f"#!/bin/sh\n# node {self.node}: {what}\n{exports}exec {shlex.join(self.argv)}\n"


@dataclasses.dataclass(frozen=True)
class Deployments:
    commands: tuple[NodeCommand, ...]
    env: dict[str, str]
    #: file name -> content, each mounted (or copied) into ``replica_dir``.
    files: dict[str, str]
    manifests: tuple[dict[str, Any], ...]
    replica_dir: str

    def manifests_yaml(self) -> str:
        return str(yaml.dump_all(self.manifests, Dumper=_Dumper, sort_keys=False))

    def env_file(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in self.env.items())


#: What LeaderWorkerSet puts in a worker pod's environment (a worker's index, the group leader's address), as a
#: worker has them: Kubernetes expands ``$(NAME)`` in a container's arguments from its environment before the
#: process starts, so vLLM's parser reads these values, never the references.
LWS_WORKER_ENV = {"LWS_WORKER_INDEX": "1", "LWS_LEADER_ADDRESS": "leader-0.fleet"}


def served_args(manifests: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, ...], ...]:
    """The arguments of every container ``manifests`` start with ``vllm serve`` (a Deployment's pod, a
    LeaderWorkerSet's leader and worker), for vLLM's own parser to read: each ``$(NAME)`` of
    :data:`LWS_WORKER_ENV` expanded as Kubernetes expands it in the pod."""
    found: list[tuple[str, ...]] = []

    def expand(arg: str) -> str:
        return re.sub(r"\$\((\w+)\)", lambda m: LWS_WORKER_ENV.get(m.group(1), m.group(0)), arg)

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            if node.get("command") == ["vllm", "serve"]:
                found.append(tuple(expand(str(a)) for a in node.get("args", ())))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(list(manifests))
    return tuple(found)


def multi_node_args(nodes: int, rank: str, address: str) -> list[str]:
    """A replica over ``nodes`` nodes, as node ``rank`` of it (vLLM's multi-node multiprocessing)."""
    args = ["--nnodes", str(nodes), "--node-rank", rank, "--master-addr", address, "--master-port", str(MASTER_PORT)]
    return args + (["--headless"] if rank != "0" else [])


def dp_commands(
    server_args: Sequence[str],
    *,
    replicas: int,
    tensor_parallel_size: int,
    cards_per_node: int,
    head_address: str,
    rpc_port: int = DP_RPC_PORT,
    pipeline_parallel_size: int = 1,
) -> tuple[NodeCommand, ...]:
    """``vllm serve`` per node: ``replicas`` data-parallel ranks of TP x PP cards, as many per node as its cards
    hold; the head node (rank 0 on) serves the API, the others are headless. A replica spanning nodes: each replica
    its own multi-node server (see the module docstring), its first node at ``head_address`` for replica 0 and at
    the placeholder ``REPLICA<r>_NODE0_IP`` for the others."""
    cards = tensor_parallel_size * pipeline_parallel_size
    spans = placement(tensor_parallel_size, pipeline_parallel_size, cards_per_node)
    if cards > cards_per_node and spans is not None:
        nodes, out = spans[0], []
        for replica in range(replicas):
            address = head_address if replica == 0 else f"REPLICA{replica}_NODE0_IP"
            for rank in range(nodes):
                argv = ["vllm", "serve", *server_args, *multi_node_args(nodes, str(rank), address)]
                out.append(NodeCommand(replica * nodes + rank, replica, 1 if rank == 0 else 0, tuple(argv), rank))
        return tuple(out)
    per_node = max(1, cards_per_node // cards)
    nodes = math.ceil(replicas / per_node)
    out = []
    for node in range(nodes):
        start = node * per_node
        local = min(per_node, replicas - start)
        argv = [
            "vllm",
            "serve",
            *server_args,
            "--data-parallel-size",
            str(replicas),
            "--data-parallel-size-local",
            str(local),
            "--data-parallel-address",
            head_address,
            "--data-parallel-rpc-port",
            str(rpc_port),
        ]
        if node:
            argv += ["--data-parallel-start-rank", str(start), "--headless"]
        out.append(NodeCommand(node, start, local, tuple(argv)))
    return tuple(out)


def _resource(device: str) -> str | None:
    key = device.strip().lower()
    return next((r for prefix, r in _RESOURCES.items() if key.startswith(prefix)), None)


def manifests(
    server_args: Sequence[str],
    env: Mapping[str, str],
    files: Mapping[str, str],
    *,
    replicas: int,
    tensor_parallel_size: int,
    device: str,
    name: str,
    image: str,
    replica_dir: str,
    warmup_s: float | None,
    pipeline_parallel_size: int = 1,
    cards_per_node: int | None = None,
) -> tuple[dict[str, Any], ...]:
    """A ConfigMap with the replica's files (when it has any), a Deployment of ``replicas`` pods (one replica each)
    and a Service in front of them; for replicas spanning nodes of ``cards_per_node`` cards, a LeaderWorkerSet of
    ``replicas`` groups (a pod per node) in place of the Deployment, the Service in front of the leaders."""
    cards = tensor_parallel_size * pipeline_parallel_size
    spans = placement(tensor_parallel_size, pipeline_parallel_size, cards_per_node or cards)
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "vllm-replica"}
    probe = {"httpGet": {"path": "/health", "port": PORT}, "periodSeconds": _PROBE_PERIOD_S}
    startup_s = max(_MIN_STARTUP_S, 2 * (warmup_s or 0.0))
    container: dict[str, Any] = {
        "name": "vllm",
        "image": image,
        # vLLM's own launcher, as the node scripts and the LeaderWorkerSet use (vLLM 0.32 deprecates running
        # vllm.entrypoints.openai.api_server as a module: entrypoints/openai/api_server.py warns "use vllm serve")
        "command": ["vllm", "serve"],
        "args": [*server_args, "--host", "0.0.0.0", "--port", str(PORT)],
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "ports": [{"name": "http", "containerPort": PORT}],
        "startupProbe": probe | {"failureThreshold": math.ceil(startup_s / _PROBE_PERIOD_S)},
        "readinessProbe": probe | {"failureThreshold": 3},
        "livenessProbe": probe | {"failureThreshold": 6},
    }
    pod_cards = cards if spans is None or spans[0] == 1 else spans[1]
    resource = _resource(device)
    if resource is not None:
        container["resources"] = {"limits": {resource: pod_cards}, "requests": {resource: pod_cards}}
    pod: dict[str, Any] = {"containers": [container]}
    docs: list[dict[str, Any]] = []
    if files:
        config = f"{name}-replica-files"
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": config, "labels": labels},
                "data": dict(files),
            }
        )
        container["volumeMounts"] = [{"name": "replica-files", "mountPath": replica_dir, "readOnly": True}]
        pod["volumes"] = [{"name": "replica-files", "configMap": {"name": config}}]
    annotations = {"prometheus.io/scrape": "true", "prometheus.io/port": str(PORT), "prometheus.io/path": "/metrics"}
    if spans is not None and spans[0] > 1:
        docs += _leader_workers(pod, labels, annotations, replicas, spans[0], name)
        return tuple(docs)
    docs.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod},
            },
        }
    )
    docs.append(_service(name, labels, labels))
    return tuple(docs)


def _service(name: str, labels: dict[str, str], selector: dict[str, str]) -> dict[str, Any]:
    """The Service in front of the pods ``selector`` selects (those serving the API), on their port named http."""
    spec = {"selector": selector, "ports": [{"name": "http", "port": PORT, "targetPort": "http"}]}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels}, "spec": spec}


def _leader_workers(pod: dict[str, Any], labels: dict[str, str], annotations: dict[str, str], replicas: int,
                   nodes: int, name: str) -> list[dict[str, Any]]:  # fmt: skip
    """A LeaderWorkerSet of ``replicas`` groups of ``nodes`` pods, each pod ``pod`` with its node's part of the
    launch (``vllm serve``: LWS sets the leader's address and each pod's index in its environment), the probes and
    the scrape annotations on the leader only, and a Service on the leaders."""
    container = pod["containers"][0]
    args = list(container["args"])
    leader = dict(container, command=["vllm", "serve"])
    leader["args"] = [*args, *multi_node_args(nodes, "0", "$(LWS_LEADER_ADDRESS)")]
    worker = {k: v for k, v in container.items() if not k.endswith("Probe") and k != "ports"}
    worker["command"] = ["vllm", "serve"]
    # a worker serves no API: the server's arguments without the listening address (the last four)
    worker["args"] = [*args[:-4], *multi_node_args(nodes, "$(LWS_WORKER_INDEX)", "$(LWS_LEADER_ADDRESS)")]
    leaders = labels | {"role": "leader"}
    spec = {
        "replicas": replicas,
        "startupPolicy": "LeaderCreated",
        "leaderWorkerTemplate": {
            "size": nodes,
            "restartPolicy": "RecreateGroupOnPodRestart",
            "leaderTemplate": {
                "metadata": {"labels": leaders, "annotations": annotations},
                "spec": pod | {"containers": [leader]},
            },
            "workerTemplate": {"metadata": {"labels": labels}, "spec": pod | {"containers": [worker]}},
        },
    }
    lws = {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": {"name": name, "labels": labels}, "spec": spec}
    return [lws, _service(name, labels, {_LWS_NAME: name, "role": "leader"})]


def deployments(
    server_args: Sequence[str],
    env: Mapping[str, str],
    files: Mapping[str, str],
    *,
    replicas: int,
    tensor_parallel_size: int,
    cards_per_node: int,
    device: str,
    name: str,
    image: str,
    head_address: str,
    replica_dir: str,
    warmup_s: float | None,
    pipeline_parallel_size: int = 1,
) -> Deployments:
    """Both deployments of ``replicas`` replicas whose server ``serve`` would start with ``server_args`` (its
    arguments, launcher left out), ``env`` and ``files`` (path -> content, every path in ``replica_dir``)."""
    named = {PurePosixPath(path).name: text for path, text in files.items()}
    commands = dp_commands(
        server_args,
        replicas=replicas,
        tensor_parallel_size=tensor_parallel_size,
        cards_per_node=cards_per_node,
        head_address=head_address,
        pipeline_parallel_size=pipeline_parallel_size,
    )
    docs = manifests(
        server_args,
        env,
        named,
        replicas=replicas,
        tensor_parallel_size=tensor_parallel_size,
        device=device,
        name=name,
        image=image,
        replica_dir=replica_dir,
        warmup_s=warmup_s,
        pipeline_parallel_size=pipeline_parallel_size,
        cards_per_node=cards_per_node,
    )
    return Deployments(commands, dict(env), named, docs, replica_dir)
