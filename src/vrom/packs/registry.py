"""The pack registry as the cache sees it: where it is, fetching it, and looking packs up in it.

A registry is one ``registry.json`` (`vrom.packs.manifest.Registry`) at an ``https://``/
``http://`` URL (fetched with httpx), a ``file://`` URL or a path. The
last copy fetched over HTTP is kept in the cache folder as ``registry.json``, with where from and
when, and reused while fresh, or with a warning when the registry cannot be fetched.
"""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from vrom.bounded_json import loads_bounded
from vrom.errors import PackError, ValidationError, VromError
from vrom.packs.manifest import (
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    PACK_ID,
    REGISTRY_NAME,
    VERSION,
    Registry,
    RegistryEntry,
)
from vrom.packs.transfer import FetchFailed, Session, file_path, read_bytes
from vrom.settings import REGISTRY_URL_ENV

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

HUB_PREFIX = "hub://"


def parse_pack_ref(ref: str) -> tuple[str, str | None]:
    """Return ``(id, version or None)`` from ``id``, ``hub://id`` or ``hub://id@version``."""
    text = ref.strip()
    if text.lower().startswith(HUB_PREFIX):
        text = text[len(HUB_PREFIX) :]
    pack_id, _, version = text.partition("@")
    if not PACK_ID.match(pack_id):
        raise PackError(f"{ref!r} is not a pack id or hub://id (a-z, 0-9, . _ -)")
    if version and not VERSION.match(version):
        raise PackError(f"{ref!r}: version {version!r} is not X.Y.Z")
    return pack_id, version or None


def registry_location(value: str) -> str:
    """Return the registry's URL: http(s) as given, a path or ``file://`` URL as a ``file://`` URL."""
    text = value.strip()
    scheme = urlsplit(text).scheme.lower()
    if scheme in ("http", "https"):
        return text + REGISTRY_NAME if text.endswith("/") else text
    if scheme == "file":
        path = file_path(text)
    elif len(scheme) > 1:  # one letter is a Windows drive, not a scheme
        raise PackError(
            f"registry {value!r}: use an https://, http:// or file:// URL or a path, not {scheme}:"
        )
    else:
        path = Path(text).expanduser()
    path = path.absolute()
    if path.is_dir() or (not path.exists() and path.suffix.lower() != ".json"):
        path = path / REGISTRY_NAME
    return path.as_uri()


def parse_json(raw: bytes, url: str) -> Any:
    """Return the JSON document fetched from ``url``, or raise `FetchFailed` if it is not JSON,
    or larger or nested deeper than a registry or manifest may be (`MAX_JSON_DEPTH`)."""
    try:
        return loads_bounded(raw, max_depth=MAX_JSON_DEPTH, max_bytes=MAX_JSON_BYTES, what=url)
    except ValidationError as exc:
        raise FetchFailed(str(exc)) from exc


class PackRegistry:
    """One registry (or none configured), with its last fetched copy kept in ``copy_dir``.

    ``url`` is a location `registry_location` has normalised, or None: then every look-up raises
    `PackError` saying how to configure one. An HTTP registry's copy is reused for
    ``ttl_seconds``; a local registry is read on every call.
    """

    def __init__(
        self,
        url: str | None,
        copy_dir: Path,
        *,
        ttl_seconds: float,
        http_client: httpx.Client | None,
        timeout: float,
        deadline: float | None,
    ) -> None:
        self.url = url
        self._copy_dir = copy_dir
        self._ttl_seconds = ttl_seconds
        self._http_client = http_client
        self._timeout = timeout
        self._deadline = deadline

    def get(self, refresh: bool = False) -> Registry:
        """Return the registry: the cached copy while fresh, else fetched again.

        When a fetch fails (offline, HTTP error, not JSON) and a copy of this registry exists,
        the copy is used with a `RuntimeWarning`; with no copy, `PackError`. A registry that is
        JSON but breaks the format raises `PackError` naming what is wrong.
        """
        return self._get(refresh)[0]

    def _get(self, refresh: bool) -> tuple[Registry, bool]:
        """Return the registry and whether it was fetched just now (False: the cached copy)."""
        url = self.require_url()
        copy = self._read_copy(url)
        now = time.time()
        if copy is not None and not refresh and not url.startswith("file:"):
            registry, fetched_at = copy
            if 0 <= now - fetched_at < self._ttl_seconds:
                return registry, False
        try:
            with Session(self._http_client, self._timeout, self._deadline) as session:
                raw = read_bytes(session, url, MAX_JSON_BYTES)
            data = parse_json(raw, url)
        except FetchFailed as exc:
            if copy is None:
                raise PackError(
                    f"cannot fetch the pack registry ({exc}) and no copy of it is cached: "
                    f"check the connection or {REGISTRY_URL_ENV}"
                ) from exc
            registry, fetched_at = copy
            message = (
                f"cannot refresh the pack registry ({exc}); using the copy fetched "
                f"{_age(now - fetched_at)} ago"
            )
            logger.warning(message)
            # blame the caller of VromCache.get_registry, which called this
            warnings.warn(message, RuntimeWarning, stacklevel=4)
            return registry, False
        registry = Registry.from_dict(data, f"registry at {url}")
        self._write_copy(url, data, now)
        return registry, True

    def _lookup(self, id_or_uri: str) -> tuple[Registry, RegistryEntry | None]:
        """Return the registry and its entry for the reference (None when it lists none).

        A reference the cached copy does not list (no such id, or another version) fetches the
        registry again before it is called missing: a pack published since the copy was made
        is found at once, not after the copy's TTL.
        """
        pack_id, version = parse_pack_ref(id_or_uri)
        registry, fetched = self._get(refresh=False)
        entry = registry.get(pack_id)
        if not fetched and (entry is None or version not in (None, entry.version)):
            registry, _ = self._get(refresh=True)
            entry = registry.get(pack_id)
        return registry, entry

    def find(self, id_or_uri: str) -> RegistryEntry | None:
        """Return the registry's entry for ``id``, ``hub://id`` or ``hub://id@version``, or None
        when it lists no such pack (or not at that version)."""
        _, version = parse_pack_ref(id_or_uri)
        entry = self._lookup(id_or_uri)[1]
        return entry if entry is not None and version in (None, entry.version) else None

    def resolve(self, id_or_uri: str) -> RegistryEntry:
        """Return the registry's entry for ``id``, ``hub://id`` or ``hub://id@version``, or
        raise `PackError` naming the packs it lists."""
        pack_id, version = parse_pack_ref(id_or_uri)
        registry, entry = self._lookup(id_or_uri)
        if entry is None:
            available = ", ".join(sorted(e.id for e in registry.packs)) or "(none)"
            raise PackError(
                f"pack {pack_id!r} is not in the registry at {self.url}; available: {available}"
            )
        if version is not None and version != entry.version:
            raise PackError(
                f"the registry at {self.url} has {pack_id} {entry.version}, not "
                f"{version} (it lists one version per pack): ask for {pack_id} instead"
            )
        return entry

    def require_url(self) -> str:
        """Return the registry's URL, or raise `PackError` when none is configured."""
        if self.url is None:
            raise PackError(
                "no pack registry is configured: pass registry_url= or set "
                f"{REGISTRY_URL_ENV} to a registry.json URL, a file:// URL or a folder path"
            )
        return self.url

    def locate(self, ref: str) -> str:
        """Return the URL of a registry file reference: absolute as is, else registry-relative."""
        if urlsplit(ref).scheme.lower() in ("http", "https", "file"):
            return ref
        if Path(ref).is_absolute():
            return Path(ref).as_uri()
        return urljoin(self.require_url(), ref)

    def _read_copy(self, url: str) -> tuple[Registry, float] | None:
        """Return the cached copy of the registry at ``url`` and its fetch time, if readable."""
        path = self._copy_dir / REGISTRY_NAME
        try:
            data = loads_bounded(
                path.read_bytes(),
                max_depth=MAX_JSON_DEPTH,
                max_bytes=MAX_JSON_BYTES,
                what=str(path),
            )
            if data.get("fetched_from") != url:
                return None
            return Registry.from_dict(data), float(data["fetched_at"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError, VromError):
            return None

    def _write_copy(self, url: str, data: Any, now: float) -> None:
        """Save the registry with where and when it was fetched (best effort)."""
        path = self._copy_dir / REGISTRY_NAME
        copy = {**data, "fetched_from": url, "fetched_at": now}
        try:
            self._copy_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{REGISTRY_NAME}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(copy, indent=1, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            logger.warning("cannot save the registry copy to %s: %s", path, exc)


def _age(seconds: float) -> str:
    """Return a duration for a person: 42 s, 7 min, 3 h, 2 days."""
    if seconds < 120:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"
