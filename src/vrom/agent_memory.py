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
from typing import Any

from vrom._pack_models import ModelProgress, PackModels
from vrom.embed import Embedder
from vrom.embed.rerank import RerankerChoice, Reranking
from vrom.errors import PackError, ValidationError
from vrom.pack import Pack
from vrom.packs.cache import PullProgress, StorageEstimate, VromCache
from vrom.packs.manifest import RegistryEntry
from vrom.packs.quota import parse_quota
from vrom.packs.registry import parse_pack_ref
from vrom.packs.signing import PublicKey, load_trusted_keys
from vrom.queryable import Closing
from vrom.results import MountStatus, SearchResult
from vrom.search.context import check_context_window
from vrom.search.query import check_query
from vrom.seed_views import pack_context, search_results
from vrom.settings import Settings

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


class AgentMemory(PackModels, Closing):
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
        reranker: RerankerChoice = None,
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
        (`vrom.settings.Settings`), resolved from it now when not given; the arguments beat it.
        ``reranker`` (a `vrom.Reranker` or a spec, ``onnx:DIR``) is what ``search(...,
        rerank=True)`` reorders a mounted pack's first hits with."""
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
        self._reranking = Reranking(reranker)  # closed by `destroy` if made from a spec
        self._extra_embedder = embedder
        self._cache: VromCache | None = None
        self._mounted: Pack | None = None
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
        self._reranking.close()
        self._cache = None
        self._destroyed = True

    def close(self) -> None:
        """`destroy`: what ending a ``with AgentMemory() as memory:`` block does."""
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
        mounted = Pack.open(pack, self._embedder_for(pack.manifest))
        mounted.corpus.reranking = Reranking(self._reranking.reranker)  # ours, not the pack's
        self.unmount()
        self._mounted = mounted
        logger.info(
            "mounted %s %s (%d vectors)", entry.id, pack.version, mounted.manifest.vector_count
        )
        return self.get_mount_status()

    def unmount(self) -> None:
        """Let the mounted pack go (it stays in the cache unless it was evicted while mounted;
        the model stays loaded)."""
        mounted, self._mounted = self._mounted, None
        if mounted is not None:
            mounted.close()  # the index and the store; the model stays loaded
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
        rerank: bool | int = False,
    ) -> list[SearchResult]:
        """Return the ``top_k`` best chunks for ``query``, best first.

        ``mode``: ``vector`` (the default: nearest in meaning; ``distance`` is the cosine
        distance in [0, 2]), ``keyword`` (BM25 over the pack's keyword index; no model needed),
        ``hybrid`` (both, fused: `vrom.search.fusion.fuse`) or ``rerank``. Outside vector mode,
        ``distance`` is ``1 - score / best score`` (0 for the best hit) and ``metadata`` carries
        ``score`` and its parts in ``scores``. ``expand_context`` joins each chunk with up to
        ``context_window`` neighbours on each side. ``ef_search`` (at least ``top_k``) widens
        the graph search for this query. ``rerank`` (True: the first 30; or a number) reorders
        the first chunks with the ``reranker`` given at construction; a reranked result's
        ``distance`` is 1 minus the sigmoid of the reranker's score, in (0, 1).
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
        check_context_window(context_window)
        report = mounted.search(
            query,
            top_k,
            mode=mode,
            ef_search=ef_search,
            expand_context=expand_context and context_window > 0,
            context_window=context_window,
            rerank=rerank,
        )
        return search_results(report, mode, mounted.manifest.source.get("url_base"))

    format_context = staticmethod(pack_context)
    """``format_context(results, include_sources=True, max_tokens=None, *, relative_cutoff)``:
    the seed's prompt context of `search`'s results (`vrom.seed_views.pack_context`)."""

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

    def _require_mounted(self) -> Pack:
        self._require_cache()
        if self._mounted is None:
            raise PackError("nothing is mounted: call mount(pack_id) first")
        return self._mounted
