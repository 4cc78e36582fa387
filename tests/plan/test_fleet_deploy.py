"""A fleet's deployments (``plan/fleet_deploy.py``): the manifests validate against Kubernetes' own schema (the
kubernetes-validate package, a named version, strict), vLLM's data-parallel launch assigns every rank once and
its commands parse with the installed vLLM's own parser (tests/cli/test_cli_serve_args.py, beside the parser it
builds once)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from vllm_hpu_mm.plan.fleet_deploy import LWS_WORKER_ENV, deployments, dp_commands, manifests, served_args

#: The Kubernetes version the manifests are checked against (kubernetes-validate ships its schemas).
KUBERNETES = "1.33.0"
ARGS = ["--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--tensor-parallel-size", "2", "--max-num-seqs", "64"]
ENV = {"VLLM_BUCKETING_FROM_FILE": "/etc/vllm-hpu-mm/vllm-gaudi-buckets.txt", "VLLM_MULTIMODAL_BUCKETS": "1600,3136"}


@pytest.mark.parametrize(("files", "device", "resource"), [({"vllm-gaudi-buckets.txt": "(1, 128, 0)\n"}, "gaudi2",
                         "habana.ai/gaudi"), ({}, "h100", "nvidia.com/gpu"), ({}, "cpu", None)])  # fmt: skip
def test_the_manifests_validate_for_a_named_kubernetes_version(files: dict[str, str], device: str,
                                                               resource: str | None) -> None:  # fmt: skip
    docs = manifests(ARGS, ENV, files, replicas=3, tensor_parallel_size=2, device=device, name="qwen7b",
                     image="vllm-gaudi:1.22", replica_dir="/etc/vllm-hpu-mm", warmup_s=900.0)  # fmt: skip
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
    kinds = [d["kind"] for d in docs]
    assert kinds == (["ConfigMap"] if files else []) + ["Deployment", "Service"]
    deployment = docs[-2]
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert deployment["spec"]["replicas"] == 3
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    # the warm-up estimate (900 s) fits twice in the startup probe's budget
    assert container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] >= 1800
    assert {e["name"]: e["value"] for e in container["env"]} == ENV
    if resource is None:
        assert "resources" not in container
    else:
        assert container["resources"]["limits"] == {resource: 2}
    if files:
        assert docs[0]["data"] == files
        assert container["volumeMounts"][0]["mountPath"] == "/etc/vllm-hpu-mm"


def test_a_manifest_kubernetes_would_refuse_is_caught_by_the_validator() -> None:
    docs = manifests(ARGS, ENV, {}, replicas=3, tensor_parallel_size=2, device="gaudi3", name="qwen7b",
                     image="img", replica_dir="/etc/x", warmup_s=None)  # fmt: skip
    deployment = docs[0]
    deployment["spec"]["replicas"] = "three"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES, strict=True)


@pytest.mark.parametrize(("replicas", "tp", "per_node", "locals_"), [(5, 2, 8, [4, 1]), (3, 4, 8, [2, 1]),
                                                                     (2, 1, 8, [2]), (6, 8, 8, [1] * 6)])  # fmt: skip
def test_every_data_parallel_rank_is_launched_once_with_the_head_serving(replicas: int, tp: int, per_node: int,
                                                                        locals_: list[int]) -> None:  # fmt: skip
    commands = dp_commands(ARGS, replicas=replicas, tensor_parallel_size=tp, cards_per_node=per_node,
                           head_address="10.0.0.1")  # fmt: skip
    assert [c.local for c in commands] == locals_
    ranks = [r for c in commands for r in range(c.start, c.start + c.local)]
    assert ranks == list(range(replicas))
    assert "--headless" not in commands[0].argv
    assert "--data-parallel-start-rank" not in commands[0].argv
    assert all("--headless" in c.argv for c in commands[1:])
    assert all(c.local * tp <= per_node for c in commands)


def test_the_written_yaml_is_the_manifests_with_files_as_literal_blocks() -> None:
    files = {"/etc/vllm-hpu-mm/vllm-gaudi-buckets.txt": "# prompt\n(1, 128, [0, 4])\n"}
    d = deployments(ARGS, ENV, files, replicas=2,
                    tensor_parallel_size=2, cards_per_node=8, device="gaudi2", name="q", image="i",
                    head_address="10.0.0.1", replica_dir="/etc/vllm-hpu-mm", warmup_s=None)  # fmt: skip
    text = d.manifests_yaml()
    assert list(yaml.safe_load_all(text)) == list(d.manifests)
    assert "&id" not in text
    assert "vllm-gaudi-buckets.txt: |" in text
    assert d.files == {"vllm-gaudi-buckets.txt": files["/etc/vllm-hpu-mm/vllm-gaudi-buckets.txt"]}
    assert d.commands[0].argv[2:8] == tuple(ARGS)  # the server's arguments after `vllm serve`


#: The LeaderWorkerSet CRD's own schema (kubernetes-sigs/lws @ 060ab4da, tests/data/SOURCES.md), strict as
#: `kubectl apply --validate=strict` is: a field the schema does not name is an error.
LWS_SCHEMA = Path(__file__).parents[1] / "data" / "kubernetes" / "leaderworkerset-v1-schema.json"


def _strict(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def lws_validator() -> jsonschema.Draft7Validator:
    schema = _strict(json.loads(LWS_SCHEMA.read_text()))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _lws_docs(files: dict[str, str]) -> tuple[dict[str, Any], ...]:
    # TP 4 x PP 4 on nodes of 8 cards: two stages a node, a replica over 2 nodes
    return manifests([*ARGS, "--pipeline-parallel-size", "4"], ENV, files, replicas=3, tensor_parallel_size=4,
                     device="gaudi3", name="qwen72b", image="vllm-gaudi:1.22", replica_dir="/etc/vllm-hpu-mm",
                     warmup_s=900.0, pipeline_parallel_size=4, cards_per_node=8)  # fmt: skip


def test_every_container_that_runs_vllm_serve_is_found_for_its_parser() -> None:
    leader, worker = served_args(_lws_docs({}))  # fleet --validate reads each with vLLM's own parser
    assert leader[: len(ARGS)] == worker[: len(ARGS)] == tuple(ARGS)
    assert "--headless" in worker
    assert "--headless" not in leader
    # held-out r7fleet case 5: --validate read the worker's "$(LWS_WORKER_INDEX)" as the node rank and vLLM's parser
    # refused it; Kubernetes expands it from the pod's environment first, as these arguments now read
    assert worker[worker.index("--node-rank") + 1] == LWS_WORKER_ENV["LWS_WORKER_INDEX"]
    assert not any("$(" in a for a in (*leader, *worker))


def test_replicas_spanning_nodes_are_a_leader_worker_set_valid_under_its_own_crd_schema() -> None:
    docs = _lws_docs({"vllm-gaudi-buckets.txt": "(1, 128, 0)\n"})
    assert [d["kind"] for d in docs] == ["ConfigMap", "LeaderWorkerSet", "Service"]
    lws, service = docs[1], docs[2]
    lws_validator().validate(lws)
    kubernetes_validate.validate(docs[0], KUBERNETES, strict=True)
    kubernetes_validate.validate(service, KUBERNETES, strict=True)
    group = lws["spec"]["leaderWorkerTemplate"]
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert lws["spec"]["replicas"] == 3
    assert group["size"] == 2
    for role in ("leaderTemplate", "workerTemplate"):
        # each pod template as Kubernetes itself reads one (a PodTemplate of the named version, strict)
        template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": role.lower()},
                    "template": group[role]}  # fmt: skip
        kubernetes_validate.validate(template, KUBERNETES, strict=True)
        container = group[role]["spec"]["containers"][0]
        assert container["resources"]["limits"] == {"habana.ai/gaudi": 8}  # a node's share: 2 stages of TP 4
        assert {e["name"]: e["value"] for e in container["env"]} == ENV
        assert container["volumeMounts"][0]["mountPath"] == "/etc/vllm-hpu-mm"
        assert group[role]["spec"]["volumes"][0]["configMap"]["name"] == docs[0]["metadata"]["name"]
    leader = group["leaderTemplate"]["spec"]["containers"][0]
    worker = group["workerTemplate"]["spec"]["containers"][0]
    assert leader["readinessProbe"]["httpGet"]["path"] == "/health"
    assert leader["livenessProbe"]["httpGet"]["path"] == "/health"
    assert "readinessProbe" not in worker  # a worker serves no API
    assert group["leaderTemplate"]["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert "--headless" in worker["args"]
    assert "--headless" not in leader["args"]
    assert "$(LWS_WORKER_INDEX)" in worker["args"]
    assert service["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": "qwen72b", "role": "leader"}
    assert group["leaderTemplate"]["metadata"]["labels"]["role"] == "leader"


@pytest.mark.parametrize(("path", "value"), [(("spec", "leaderWorkerTemplate", "size"), "two"),
                                             (("spec", "leaderWorkerTemplate", "restartPolicy"), "Sometimes"),
                                             (("spec", "leaderWorkerTemplate", "groupSize"), 2),
                                             (("spec", "replicas"), -1.5)])  # fmt: skip
def test_a_leader_worker_set_its_crd_would_refuse_is_caught(path: tuple[str, ...], value: object) -> None:
    lws = _lws_docs({})[0]
    lws_validator().validate(lws)
    node = lws
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        lws_validator().validate(lws)


def test_a_broken_pod_template_inside_the_leader_worker_set_is_caught() -> None:
    group = _lws_docs({})[0]["spec"]["leaderWorkerTemplate"]
    group["workerTemplate"]["spec"]["containers"][0]["ports"] = [{"containerPort": "http"}]
    template = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "w"},
        "template": group["workerTemplate"],
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(template, KUBERNETES, strict=True)


def test_a_replica_spanning_nodes_is_its_own_multi_node_server() -> None:
    commands = dp_commands(ARGS, replicas=3, tensor_parallel_size=8, pipeline_parallel_size=2, cards_per_node=8,
                           head_address="10.0.0.1")  # fmt: skip
    assert len(commands) == 6
    assert [c.node for c in commands] == list(range(6))
    for replica in range(3):
        ranks = [c for c in commands if c.start == replica]
        assert [c.rank for c in ranks] == [0, 1]
        assert "--headless" not in ranks[0].argv
        assert "--headless" in ranks[1].argv
        assert all("--data-parallel-size" not in c.argv for c in ranks)
        addresses = {c.argv[c.argv.index("--master-addr") + 1] for c in ranks}
        assert addresses == {"10.0.0.1" if replica == 0 else f"REPLICA{replica}_NODE0_IP"}
    within = dp_commands(ARGS, replicas=3, tensor_parallel_size=2, pipeline_parallel_size=2, cards_per_node=8,
                         head_address="10.0.0.1")  # fmt: skip
    assert [c.local for c in within] == [2, 1]  # 4 cards a replica, 2 a node
