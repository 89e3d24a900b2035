"""`AgentMemory`: give an agent a prebuilt knowledge pack by id, the way a console mounts a cartridge.

    with AgentMemory(registry_url="https://example.org/packs/registry.json") as memory:
        memory.init()
        memory.mount("python-docs")                 # pulled once, verified, cached
        results = memory.search("how do I read a file", top_k=5)
        prompt_context = memory.format_context(results, max_tokens=1500)

A mounted pack is read in place from the cache: its store opens read-only and immutable, its
HNSW graph memory-mapped, so mounting costs no copying and no embedding, only the query model
(which stays loaded when the next pack uses the same one). Since both files are open, evicting
the mounted pack removes its files at once where the system allows deleting open files (POSIX:
the open store and the mapping keep reading them) and the pack stays mounted until unmounted;
elsewhere (Windows) its files are removed when it is unmounted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from vrom._pack_models import ModelProgress, PackModels
from vrom.corpus import Corpus
from vrom.embed import Embedder, EmbedderBinding
from vrom.errors import PackError, StorageError, ValidationError
from vrom.index.hnsw import HnswIndex
from vrom.packs.cache import CachedPack, PullProgress, StorageEstimate, VromCache
from vrom.packs.manifest import PackManifest, RegistryEntry
from vrom.packs.quota import parse_quota
from vrom.packs.registry import parse_pack_ref
from vrom.packs.signing import PublicKey, load_trusted_keys
from vrom.results import Hit, MountStatus, SearchResult
from vrom.search.context import (
    RELATIVE_CUTOFF,
    Passage,
    above_cutoff,
    check_context_window,
    distinct_passages,
    estimate_tokens,
    expand_hits,
    fill_budget,
    without_repeated_lines,
)
from vrom.search.query import check_query
from vrom.search.vector import VectorIndex, check_mode
from vrom.settings import Settings
from vrom.store import open_store

logger = logging.getLogger("vrom.agent_memory")

LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,  # the seed's own spelling (its TypeScript SDK's 'warn')
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "silent": logging.CRITICAL + 10,  # above every level: nothing is logged
}
"""The ``log_level`` names `AgentMemory` takes, and the level each sets on the ``vrom`` logger
when one is given (none given: the application's logging configuration is left as it is)."""

OPEN_FILES_CAN_BE_DELETED = os.name == "posix"
"""Whether a mounted pack's files can be deleted while its store and graph are open (POSIX
keeps an unlinked file readable through its open descriptors and mappings; Windows refuses)."""


@dataclass
class _Mounted:
    pack: CachedPack
    corpus: Corpus

    @property
    def manifest(self) -> PackManifest:
        return self.pack.manifest


class AgentMemory(PackModels):
    """Mount knowledge packs from a registry and search them; use as a context manager.

    Its query models and their progress listeners are `vrom._pack_models.PackModels`.
    """

    def __init__(
        self,
        registry_url: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        log_level: str | None = None,
        *,
        embedder: Embedder | None = None,
        http_client: Any = None,
        trusted_keys: Sequence[str | PublicKey] | None = None,
        cache_quota: int | str | None = None,
        settings: Settings | None = None,
    ) -> None:
        """``log_level``: None (the default) leaves logging as the application configured it;
        ``debug``, ``info``, ``warning`` (or ``warn``), ``error``, ``critical`` or ``silent``
        is set on the ``vrom`` logger, as the seed's SDK does (for the whole process, as logging
        levels are: only when asked for); ``silent`` also hides the warnings vrom raises during
        this object's calls (an unsigned pack, a stale registry), so nothing is written at all.
        ``embedder``: a model to use for packs built with it (besides the ones vrom ships: the
        default model and the fake one). ``http_client``: an ``httpx.Client`` for the registry
        and downloads (proxies, auth). ``trusted_keys``: publisher keys (public key texts,
        ``.pub`` paths or `PublicKey`) a pack must be signed by; None reads
        ``$VROM_TRUSTED_KEYS``, and none at all accepts unsigned packs with a warning.
        ``cache_quota``: the most bytes cached packs may take (a number, or a size such as
        ``"2GiB"``); None reads ``$VROM_CACHE_QUOTA``, and none at all is 10 GiB
        (``"unlimited"``: the disk is the limit). A pull evicts the least recently used packs
        (never the mounted one) to make room, and a pack that cannot fit is refused before it
        is downloaded. ``settings``: what the environment configures
        (`vrom.settings.Settings`), resolved from it now when not given; the arguments beat it."""
        self._silent = False
        if log_level is not None:
            level = LOG_LEVELS.get(log_level.lower()) if isinstance(log_level, str) else None
            if level is None:
                raise ValidationError(
                    f"log_level must be one of {', '.join(LOG_LEVELS)}, not {log_level!r}"
                )
            logging.getLogger("vrom").setLevel(level)  # asked for by name: the seed's contract
            self._silent = level > logging.CRITICAL
        # the facade resolves the settings; VromCache, the engine, takes them as given
        config = Settings.from_environment() if settings is None else settings
        self._registry_url = registry_url if registry_url is not None else config.registry_url
        self._cache_dir = cache_dir if cache_dir else config.cache_dir
        self._http_client = http_client
        keys = trusted_keys if trusted_keys is not None else config.trusted_keys
        self._trusted_keys = load_trusted_keys(keys)
        self._cache_quota = cache_quota if cache_quota is not None else config.cache_quota
        parse_quota(self._cache_quota)  # a bad quota is refused here, not at the first pull
        self._extra_embedder = embedder
        self._cache: VromCache | None = None
        self._mounted: _Mounted | None = None
        self._embedder: Embedder | None = None  # the model loaded for the mounted pack
        self._owns_embedder = False  # False for the caller's ``embedder``: never closed here
        self._listeners: list[ModelProgress] = []
        self._evict_on_unmount: str | None = None  # a mounted pack evicted where files stay open
        self._destroyed = False
        self.model_loads = 0
        """How many times a model was loaded (a mount with the loaded model adds nothing)."""

    # -- life ------------------------------------------------------------------------------

    def init(self) -> None:
        """Prepare the cache and the registry settings (calling it again does nothing)."""
        if self._destroyed:
            raise PackError("this AgentMemory was destroyed: make a new one")
        if self._cache is None:
            self._cache = VromCache(
                self._registry_url,
                self._cache_dir,
                http_client=self._http_client,
                trusted_keys=self._trusted_keys,
                quota=self._cache_quota,
            )

    def destroy(self) -> None:
        """Unmount, release the model, and make this object unusable."""
        self.unmount()
        self._release_model()
        self._cache = None
        self._destroyed = True

    def __enter__(self) -> AgentMemory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.destroy()

    # -- mounting --------------------------------------------------------------------------

    def mount(
        self,
        id_or_uri: str,
        on_progress: Callable[[PullProgress], None] | None = None,
        force_download: bool = False,
        verify: bool = False,
    ) -> MountStatus:
        """Mount a pack by id (or ``hub://id``): pull it if it is not cached, then open it.

        The registry is read at most hourly (``force_download`` rereads it and downloads the
        pack again). The previous pack is unmounted first. A pack whose model is the one already loaded
        mounts without loading a model; one that needs a model not available here is a
        `ModelError` naming it.

        A pull checks the pack's signature (with trusted keys) and every file's SHA-256 before
        the pack is opened. A cached pack's files are compared with their size and time when
        verified, a stat each (a file changed since is a `PackError`); ``verify`` hashes them
        all again.
        """
        cache = self._require_cache()
        with self._quiet():
            if force_download:
                cache.get_registry(refresh=True)  # a forced mount also rereads the registry
            entry = cache.require_entry(id_or_uri)
            cached = cache.get_cached_manifest(entry.id)
            if force_download or cached is None or cached.version != entry.version:
                keep = () if self._mounted is None else (self._mounted.manifest.vrom_id,)
                pack = cache.pull(
                    entry, on_progress=on_progress, force_download=force_download, keep=keep
                )
            else:
                pack = cache.load_index(entry.id, verify=verify)
        if self._evict_on_unmount == entry.id:
            self._evict_on_unmount = None  # mounted again: its files are in use again
        embedder = self._embedder_for(pack.manifest)
        try:
            store = open_store(pack.store_path, read_only=True)
        except StorageError as exc:
            raise PackError(
                f"pack {entry.id} {pack.version}: its store is unreadable: {exc}"
            ) from exc
        try:
            ef = int(pack.manifest.hnsw_config.get("ef_search", 64))
            graph = HnswIndex.open_file(store.vectors, pack.index_path, expansion_search=max(ef, 1))
        except StorageError as exc:
            store.close()
            raise PackError(
                f"pack {entry.id} {pack.version}: the index is unreadable after download: {exc}"
            ) from exc
        corpus = Corpus(
            store,
            EmbedderBinding.of(embedder),
            vector_index=VectorIndex.opened(graph, store.vectors),
        )
        self.unmount()
        self._mounted = _Mounted(pack, corpus)
        logger.info("mounted %s %s (%d vectors)", entry.id, pack.version, len(graph))
        return self.get_mount_status()

    def unmount(self) -> None:
        """Let the mounted pack go (it stays in the cache unless it was evicted while mounted;
        the model stays loaded)."""
        mounted, self._mounted = self._mounted, None
        if mounted is not None:
            mounted.corpus.close()  # the index and the store; the model stays loaded
        pending, self._evict_on_unmount = self._evict_on_unmount, None
        if pending is not None and self._cache is not None:
            self._cache.evict(pending)

    def get_mount_status(self) -> MountStatus:
        """Return what is mounted (``ready`` is False when nothing is)."""
        mounted = self._mounted
        if mounted is None:
            return MountStatus(None, None, False, 0, 0, None)
        return MountStatus(
            active_vrom=mounted.manifest.vrom_id,
            version=mounted.manifest.version,
            ready=True,
            vectors=mounted.manifest.vector_count,
            dim=mounted.manifest.dimensions,
            model=mounted.manifest.model,
        )

    @property
    def is_ready(self) -> bool:
        """True when a pack is mounted and can be searched."""
        return self._mounted is not None

    # -- searching -------------------------------------------------------------------------

    def search(
        self,
        query: str,
        top_k: int = 5,
        expand_context: bool = False,
        context_window: int = 1,
        ef_search: int | None = None,
        *,
        mode: str = "vector",
    ) -> list[SearchResult]:
        """Return the ``top_k`` best chunks for ``query``, best first.

        ``mode``: ``vector`` (the default: nearest in meaning; ``distance`` is the cosine
        distance in [0, 2]), ``keyword`` (BM25 over the pack's keyword index; no model needed),
        ``hybrid`` (both, fused: `vrom.search.fusion.fuse`) or ``rerank``. Outside vector mode,
        ``distance`` is ``1 - score / best score`` (0 for the best hit) and ``metadata`` carries
        ``score`` and its parts in ``scores``. ``expand_context`` joins each chunk with up to
        ``context_window`` neighbours on each side. ``ef_search`` (at least ``top_k``) widens
        the graph search for this query.
        """
        mounted = self._require_mounted()
        check_query(query)
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= 1000:
            raise ValidationError(f"top_k must be an integer from 1 to 1000, not {top_k!r}")
        if ef_search is not None and (
            isinstance(ef_search, bool) or not isinstance(ef_search, int) or ef_search < top_k
        ):
            raise ValidationError(
                f"ef_search must be an integer of at least top_k={top_k}, not {ef_search!r}"
            )
        check_mode(mode)
        check_context_window(context_window)
        mounted.pack.wait_until_hashed()  # with trusted keys: no text of a changed file
        hits = mounted.corpus.search(query, top_k, None, mode, ef_search=ef_search)
        if expand_context and context_window:
            hits = expand_hits(mounted.corpus.store, hits, context_window)
        best = hits[0].score if hits else 0.0
        url_base = mounted.manifest.source.get("url_base")
        return [search_result(hit, mode, best, url_base) for hit in hits]

    @staticmethod
    def format_context(
        results: Sequence[SearchResult],
        include_sources: bool = True,
        max_tokens: int | None = None,
        *,
        relative_cutoff: float | None = RELATIVE_CUTOFF,
    ) -> str:
        """Return results as prompt context: ``## heading`` (unless the text begins with it),
        text, ``[Source: url]`` (the source file when the pack has no URL), split by ``---``,
        within ``max_tokens`` (estimated as ceil(characters / 4)), best first.

        As `vrom.format_context` does for a vault: results far below the best are left out
        (``relative_cutoff`` of the best similarity, or of the best score outside vector mode;
        None keeps all), overlapping texts of one document (expanded neighbours) are joined
        once and a text or line already given is not repeated, and each block that fits is used (an
        expanded one too long is tried as its chunk alone), so the budget holds the most
        relevant distinct text.
        """
        if max_tokens is not None and (isinstance(max_tokens, bool) or max_tokens < 1):
            raise ValidationError(f"max_tokens must be a positive integer, not {max_tokens!r}")
        separator = "\n\n---\n\n"
        similarity = [_similarity(result) for result in results]
        kept = [results[i] for i in above_cutoff(similarity, relative_cutoff)]
        passages = distinct_passages(
            [(str(r.metadata.get("source_file") or f"#{r.id}"), r.text) for r in kept]
        )

        def blocks(selection: list[Passage], bodies: list[str]) -> list[str]:
            rendered = []
            for passage, body in zip(selection, bodies, strict=True):
                first = kept[passage.members[0]]
                heading = first.metadata.get("section_heading") or first.metadata.get("doc_title")
                said = body.lstrip("# \n").split("\n", 1)[0].strip() == heading  # its own line
                text = f"## {heading}\n\n{body}" if heading and not said else body
                # a pack built without a URL base still names the file the text came from
                source = first.metadata.get("url") or first.metadata.get("source_file")
                cited = include_sources and source
                rendered.append(text + f"\n\n[Source: {source}]" if cited else text)
            return rendered

        def fits(selection: list[Passage]) -> bool:
            bodies = without_repeated_lines([p.text for p in selection])
            if not bodies[-1]:
                return False  # it would add only lines already given
            size = estimate_tokens(separator.join(blocks(selection, bodies)))
            return max_tokens is None or size <= max_tokens

        options: list[tuple[Passage, ...]] = []
        for passage in passages:
            chunk = kept[passage.members[0]].metadata.get("text")
            alone = (
                Passage(passage.source, chunk.strip(), passage.members[:1])
                if isinstance(chunk, str) and chunk.strip() and chunk.strip() != passage.text
                else None
            )
            options.append((passage,) if alone is None else (passage, alone))
        chosen = fill_budget(options, fits)
        return separator.join(blocks(chosen, without_repeated_lines([p.text for p in chosen])))

    # -- the cache -------------------------------------------------------------------------

    def list_vroms(self) -> list[RegistryEntry]:
        """Return the packs the registry lists."""
        cache = self._require_cache()
        with self._quiet():
            return cache.list()

    def evict(self, pack_id: str) -> bool:
        """Remove a pack from the cache; return True if it was cached.

        The mounted pack stays mounted and searchable: its store and graph are open already.
        Where open files can be deleted (POSIX) its cached files go at once; elsewhere (Windows),
        or when deleting them fails, they go when it is unmounted, and it counts as not cached
        from now on. Mounting it again pulls it again (or, before the deferred removal, keeps it).
        """
        cache = self._require_cache()
        name, _ = parse_pack_ref(pack_id)
        if self._mounted is None or self._mounted.manifest.vrom_id != name:
            return cache.evict(name)
        cached = cache.is_cached(name)
        if OPEN_FILES_CAN_BE_DELETED:
            try:
                return cache.evict(name)
            except PackError as exc:  # a file system that keeps open files busy (NFS, SMB)
                logger.info("the files of mounted pack %s stay until unmounted: %s", name, exc)
        self._evict_on_unmount = name
        logger.info("mounted pack %s is evicted when unmounted", name)
        return cached

    def is_cached(self, pack_id: str) -> bool:
        """True when the pack is in the local cache (and not evicted while mounted)."""
        name, _ = parse_pack_ref(pack_id)
        return self._evict_on_unmount != name and self._require_cache().is_cached(pack_id)

    def storage_estimate(self) -> StorageEstimate:
        """Return the bytes cached packs use (``used``) and may use (``quota``: the configured
        quota, else used plus the bytes free on the disk), the bytes free, and the pack count."""
        return self._require_cache().storage_estimate()

    # -- inside ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """Hide the warnings raised inside the block when the log level is ``silent``."""
        if not self._silent:
            yield
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield

    def _require_cache(self) -> VromCache:
        if self._destroyed:
            raise PackError("this AgentMemory was destroyed: make a new one")
        if self._cache is None:
            raise PackError("AgentMemory is not initialised: call init() first")
        return self._cache

    def _require_mounted(self) -> _Mounted:
        self._require_cache()
        if self._mounted is None:
            raise PackError("nothing is mounted: call mount(pack_id) first")
        return self._mounted


def search_result(hit: Hit, mode: str, best: float, url_base: object = None) -> SearchResult:
    """Return the seed's `SearchResult` view of a `Hit` from a pack.

    ``distance`` is the cosine distance in vector mode, else ``1 - score / best`` (``best``:
    the first hit's score). ``url`` is the chunk's frontmatter ``url``, else ``url_base`` joined
    with the note's path. An expanded hit's text is its context, ``metadata["text"]`` the chunk
    alone, and ``_context_chunks`` how many chunks were joined.
    """
    fields = hit.metadata
    url = fields.get("url")
    if not isinstance(url, str):
        url = (
            f"{url_base.rstrip('/')}/{hit.path.rsplit('.', 1)[0]}"
            if isinstance(url_base, str) and url_base
            else None
        )
    title = fields.get("title") if isinstance(fields.get("title"), str) else hit.title
    metadata: dict[str, Any] = {
        "chunk_id": hit.chunk_id,
        "source_file": hit.path,
        "section_heading": hit.heading_path,
        "prev_chunk_id": hit.prev_chunk_id,
        "next_chunk_id": hit.next_chunk_id,
        "url": url,
        "doc_title": title or hit.path,
        "content_hash": hit.content_hash,
        "text": hit.text,
    }
    if mode == "vector":
        distance = 1.0 - hit.score
    else:
        distance = 1.0 - hit.score / best if best > 0 else 1.0
        metadata["score"] = hit.score
        metadata["scores"] = dict(hit.scores)
        metadata["score_kind"] = hit.score_kind
    text = hit.text
    if hit.context_text is not None:
        text = hit.context_text
        metadata["_expanded"] = True
        metadata["_context_chunks"] = len(hit.context_chunk_ids)
    return SearchResult(text, metadata, round(min(2.0, max(0.0, distance)), 6), hit.chunk_id)


def _similarity(result: SearchResult) -> float:
    """Return how near a result is, higher nearer: its score outside vector mode, else the
    cosine similarity."""
    score = result.metadata.get("score")
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        return float(score)
    return 1.0 - result.distance
