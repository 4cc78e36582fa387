"""A fleet's deployments (``plan/fleet_deploy.py``): the manifests validate against Kubernetes' own schema (the
kubernetes-validate package, a named version, strict), vLLM's data-parallel launch assigns every rank once and
its commands parse with the installed vLLM's own parser (tests/cli/test_cli_serve_args.py, beside the parser it
builds once)."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from vllm_hpu_mm.plan.fleet_deploy import deployments, dp_commands, manifests

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
    d = deployments(["python3", "-m", "vllm.entrypoints.openai.api_server", *ARGS], ENV, files, replicas=2,
                    tensor_parallel_size=2, cards_per_node=8, device="gaudi2", name="q", image="i",
                    head_address="10.0.0.1", replica_dir="/etc/vllm-hpu-mm", warmup_s=None)  # fmt: skip
    text = d.manifests_yaml()
    assert list(yaml.safe_load_all(text)) == list(d.manifests)
    assert "&id" not in text
    assert "vllm-gaudi-buckets.txt: |" in text
    assert d.files == {"vllm-gaudi-buckets.txt": files["/etc/vllm-hpu-mm/vllm-gaudi-buckets.txt"]}
    assert d.commands[0].argv[2:8] == tuple(ARGS)  # the server's arguments after `vllm serve`, module dropped
