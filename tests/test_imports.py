"""The native libraries vrom loads coexist in one process, whatever order they load in.

usearch 2.26.2-2.26.6 wheels crash the interpreter (SIGSEGV in onnxruntime's module init) when
usearch is imported before onnxruntime; a collection that opens its HNSW index before its first
query does exactly that. pyproject.toml pins usearch below those; this keeps the pin honest.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

MODULES = ["usearch.index", "onnxruntime", "numpy", "tokenizers"]
if importlib.util.find_spec("sqlcipher3") is not None:
    MODULES.append("sqlcipher3")


@pytest.mark.parametrize("first", MODULES)
def test_native_modules_load_in_any_order(first: str) -> None:
    order = [first, *(m for m in MODULES if m != first)]
    for sequence in (order, [order[0], *reversed(order[1:])]):
        code = f"import importlib\nfor m in {sequence!r}: importlib.import_module(m)\nprint('ok')"
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0 and result.stdout.strip() == "ok", (
            f"importing {' then '.join(sequence)} failed with code {result.returncode}: "
            f"{result.stderr[-500:]}"
        )
