"""Classes closed in stop 60 (issue 34):

- Lua's own memory error ("not enough memory", LUA_ERRMEM), as the interpreter or a script's line prints it, is the
  host's memory: a Torch7 program's device refusal reads "cuda runtime error (2) : out of memory" instead."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.logs.doctor import diagnose_lines

_TRANSLATED = ["S\tbut now i <unk> m", "H\t-0.7654139995575\tmais maintenant je suis"]


@pytest.mark.parametrize(
    "line",
    [
        "exec:fairseq stderr:/Users/me/torch/install/bin/luajit: not enough memory",
        "/opt/torch/install/bin/luajit: /opt/torch/install/share/lua/5.1/nn/Linear.lua:66: not enough memory",
        "lua5.1: not enough memory",
    ],
)
def test_lua_s_memory_error_is_the_host_s_memory(line: str) -> None:
    d = diagnose_lines([*_TRANSLATED, line])
    assert d.memory == "host"
    assert d.stage == "runtime"


def test_a_torch7_device_refusal_stays_the_device_s() -> None:
    line = ("/opt/torch/install/bin/luajit: /opt/torch/install/share/lua/5.1/torch/File.lua:351: cuda runtime error "
            "(2) : out of memory at /opt/torch/extra/cutorch/lib/THC/generic/THCStorage.cu:66")  # fmt: skip
    assert diagnose_lines([*_TRANSLATED, line]).memory != "host"
