"""The query models of `AgentMemory`: the one loaded for the mounted pack, and who hears of loads.

A pack pins the model its vectors were made with (its manifest's fingerprint); a mount whose
model is already loaded reuses it, so switching between packs of one model loads nothing.
`AgentMemory` inherits these methods; mounting, searching and the cache stay in
`vrom.agent_memory`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from vrom.embed import Embedder, Fingerprint
from vrom.embed.default import DEFAULT_MODEL_ID
from vrom.errors import ModelError, PackError, ValidationError
from vrom.packs.manifest import PackManifest

ModelProgress = Callable[[Mapping[str, Any]], None]
"""Called with ``{"phase": "model", "model": id, "status": "loading" | "ready"}``."""


class PackModels:
    """The model of the mounted pack and the listeners of model loads; mixed into
    `AgentMemory`, which sets these attributes."""

    _extra_embedder: Embedder | None  # the caller's model: used when a pack needs it, never closed
    _embedder: Embedder | None  # the model loaded for the mounted pack
    _owns_embedder: bool
    _listeners: list[ModelProgress]
    model_loads: int

    def on_progress(self, listener: ModelProgress | None) -> Callable[[], bool]:
        """Call ``listener`` when a model starts and finishes loading; return its remover.

        Calling the returned function removes that listener (True if it was still there), as
        `off_progress` does. ``None`` removes every listener. A listener added twice is called
        twice, and each remover takes away one of them.
        """
        if listener is None:
            self._listeners.clear()
            return lambda: False
        if not callable(listener):
            raise ValidationError(
                f"a progress listener must be callable or None, not {type(listener).__name__}"
            )
        self._listeners.append(listener)
        return lambda: self.off_progress(listener)

    def off_progress(self, listener: ModelProgress) -> bool:
        """Stop calling ``listener``; return True if it was listening."""
        for index, known in enumerate(self._listeners):
            if known is listener:
                del self._listeners[index]
                return True
        return False

    def _embedder_for(self, manifest: PackManifest) -> Embedder:
        """Return the model the pack's queries need, reusing the loaded one when it matches."""
        wanted = _fingerprint(manifest)
        if self._embedder is not None and _same_model(self._embedder.fingerprint, wanted):
            return self._embedder
        for listener in tuple(self._listeners):  # a listener may remove itself
            listener({"phase": "model", "model": wanted.model, "status": "loading"})
        embedder = self._load_model(manifest, wanted)
        if not _same_model(embedder.fingerprint, wanted):
            raise ModelError(
                f"pack {manifest.vrom_id} was embedded with {wanted.describe()} "
                f"but the local model is {embedder.fingerprint.describe()}"
            )
        self._release_model()
        self._embedder = embedder
        self._owns_embedder = embedder is not self._extra_embedder
        self.model_loads += 1
        for listener in tuple(self._listeners):
            listener({"phase": "model", "model": wanted.model, "status": "ready"})
        return embedder

    def _load_model(self, manifest: PackManifest, wanted: Fingerprint) -> Embedder:
        if self._extra_embedder is not None and _same_model(
            self._extra_embedder.fingerprint, wanted
        ):
            return self._extra_embedder
        if wanted.model == DEFAULT_MODEL_ID:
            return Embedder.default()
        if wanted.model.startswith("fake"):
            return Embedder.fake(wanted.dims)
        raise ModelError(
            f"pack {manifest.vrom_id} needs the embedding model {wanted.model} "
            f"({wanted.dims} d), which is not available here: pass it as "
            "AgentMemory(embedder=...)"
        )

    def _release_model(self) -> None:
        if self._embedder is not None and self._owns_embedder:
            self._embedder.close()
        self._embedder, self._owns_embedder = None, False


def _fingerprint(manifest: PackManifest) -> Fingerprint:
    spec = manifest.embedding_spec
    stored = spec.get("fingerprint")
    if isinstance(stored, Mapping):
        try:
            return Fingerprint(**stored)
        except TypeError as exc:
            raise PackError(f"pack {manifest.vrom_id}: its model fingerprint is malformed") from exc
    return Fingerprint(manifest.model, "", manifest.dimensions, "", 0)


def _same_model(have: Fingerprint, wanted: Fingerprint) -> bool:
    if wanted.revision:  # a full fingerprint: the same model file, pooling and length
        return have == wanted
    return have.model == wanted.model and have.dims == wanted.dims
