"""A deterministic embedder for tests: hashed word counts, normalised. Instant, no model.

Texts that share words get similar vectors, so ranking logic can be tested with known answers;
it knows nothing of meaning (synonyms are strangers to it).
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vrom.embed import Embedder, Fingerprint

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_DIMS = 65_536
MAX_DELAY_PER_TEXT = 60.0


class FakeEmbedder(Embedder):
    """Hashes each lower-cased word into one of ``dims`` buckets with a sign, then normalises."""

    def __init__(self, dims: int = 64, delay_per_text: float = 0.0) -> None:
        if not 2 <= dims <= MAX_DIMS:
            raise ValueError(f"a fake embedder has 2 to {MAX_DIMS} dimensions")
        if not (math.isfinite(delay_per_text) and 0 <= delay_per_text <= MAX_DELAY_PER_TEXT):
            raise ValueError(f"a fake embedder's delay is 0 to {MAX_DELAY_PER_TEXT:g} s a text")
        self._fingerprint = Fingerprint("fake-hashed-words", "1", dims, "sum", 0)
        self._delay = delay_per_text  # a slow model, for tests of work that waits on one

    @property
    def fingerprint(self) -> Fingerprint:
        """The fake model's fingerprint (``fake-hashed-words``)."""
        return self._fingerprint

    def _embed(self, texts: Sequence[str], kind: str) -> npt.NDArray[np.float32]:
        if self._delay:
            time.sleep(self._delay * len(texts))
        dims = self._fingerprint.dims
        matrix = np.zeros((len(texts), dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % dims
                matrix[row, bucket] += 1.0 if digest[4] & 1 else -1.0
            if not matrix[row].any():
                matrix[row, 0] = 1.0  # an empty text still gets a unit vector
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix
