"""``vrom pack build|publish|list|pull|info|verify|evict|storage|keygen``, ``vrom search --pack``.

A warning the SDK gives while a command runs (an unsigned pack, a stale registry copy) is
printed as one ``vrom: warning:`` line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from vrom.cli.global_options import add_global_options, settings_of
from vrom.cli.output import print_json, score_label, styler
from vrom.cli.progress import stderr_console
from vrom.cli.vault_options import announce_text
from vrom.embed import Embedder, resolve_embedder
from vrom.errors import ValidationError
from vrom.settings import CACHE_QUOTA_ENV, REGISTRY_URL_ENV, TRUSTED_KEYS_ENV, key_list

REGISTRY_HELP = f"the registry: a URL, file:// URL or path (default: ${REGISTRY_URL_ENV})"
TRUSTED_HELP = (
    "public keys or .pub files a pack must be signed by, split by commas "
    f"(default: ${TRUSTED_KEYS_ENV}; with none, unsigned packs are accepted with a warning)"
)
SIGN_HELP = "sign the manifest with this private key file (from 'vrom pack keygen')"


def add_pack_commands(commands: Any) -> None:
    """Add ``vrom pack ...`` to the CLI's subcommands."""
    help_text = "Build, publish, pull and inspect knowledge packs (prebuilt, versioned stores)."
    pack = commands.add_parser(
        "pack",
        help=help_text,
        description=help_text,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = pack.add_subparsers(dest="pack_action", metavar="ACTION", required=True)
    leaves: list[argparse.ArgumentParser] = []

    def action(
        name: str,
        handler: Callable[[argparse.Namespace, TextIO], int],
        text: str,
        options: tuple[str, ...] = ("json",),
    ) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = actions.add_parser(name, help=text, description=text)
        sub.set_defaults(handler=_warning_lines(handler))
        add_global_options(sub, options)
        leaves.append(sub)
        return sub

    sub = action(
        "build",
        _build,
        "Build a pack from a notes folder or a BEIR/JSONL corpus.",
        ("json", "embedder"),
    )
    sub.add_argument("source", metavar="SOURCE", help="a vault folder, a BEIR folder or .jsonl")
    sub.add_argument("--id", dest="pack_id", required=True, help="the pack's id (a-z, 0-9, ._-)")
    sub.add_argument("--version", dest="pack_version", required=True, help="X.Y.Z")
    sub.add_argument("--name", default="", help="a display name")
    sub.add_argument("--description", default="", help="what the pack holds")
    sub.add_argument("--tags", default="", help="comma-separated tags")
    sub.add_argument("--url-base", default=None, help="URL each document's path is appended to")
    sub.add_argument("--out", default=None, help="output folder (default: ./ID-VERSION)")
    sub.add_argument("--sign", metavar="KEY", default=None, help=SIGN_HELP)

    sub = action("publish", _publish, "Copy a built pack into a registry folder and list it.")
    sub.add_argument("pack_dir", metavar="PACK_DIR")
    sub.add_argument("registry_dir", metavar="REGISTRY_DIR")
    sub.add_argument("--base-url", default=None, help="write absolute file URLs under this URL")
    sub.add_argument("--official", action="store_true", help="mark the entry as official")
    sub.add_argument("--sign", metavar="KEY", default=None, help=SIGN_HELP)

    for name, handler, text in (
        ("list", _list, "List the packs in the registry (and which are cached)."),
        ("pull", _pull, "Download a pack into the cache (verified before it is used)."),
        ("info", _info, "Show a pack's registry entry and, if cached, its manifest."),
        ("verify", _verify, "Hash a cached pack's files again and check its signature."),
        ("evict", _evict, "Remove a pack from the cache."),
    ):
        sub = action(name, handler, text)
        sub.add_argument("--registry", default=None, help=REGISTRY_HELP)
        if name != "list":
            sub.add_argument("pack", metavar="ID", help="a pack id (or hub://id)")
        if name in ("list", "pull", "info"):
            sub.add_argument(
                "--refresh",
                action="store_true",
                help="fetch the registry again, not its cached copy (an id it lacks always does)",
            )
        if name == "pull":
            sub.add_argument(
                "--force", action="store_true", help="download again (implies --refresh)"
            )
        if name in ("pull", "verify"):
            sub.add_argument("--trusted-keys", metavar="KEYS", default=None, help=TRUSTED_HELP)

    action(
        "storage",
        _storage,
        f"Show the bytes the pack cache holds and may hold (${CACHE_QUOTA_ENV}).",
    )

    sub = action(
        "keygen", _keygen, "Make a publisher key pair: NAME.key (private) and NAME.pub (public)."
    )
    sub.add_argument("--out", default=".", help="the folder to write them in (default: .)")
    sub.add_argument("--name", default="publisher", help="the files' name (default: publisher)")
    # every action's options in 'vrom pack --help', so one page shows them all
    pack.epilog = "usage of each action:\n" + "".join(
        "  " + leaf.format_usage().removeprefix("usage: ").replace("\n     ", "\n")
        for leaf in leaves
    )


def _warning_lines(
    handler: Callable[[argparse.Namespace, TextIO], int],
) -> Callable[[argparse.Namespace, TextIO], int]:
    """Return ``handler`` printing each warning it raises as one ``vrom: warning:`` line."""

    def run(args: argparse.Namespace, out: TextIO) -> int:
        with _warnings_on_stderr():
            return handler(args, out)

    return run


@contextlib.contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            label = styler(sys.stderr)("warning:", "yellow")
            for warning in caught:
                sys.stderr.write(f"vrom: {label} {warning.message}\n")


def _embedder(args: argparse.Namespace) -> Embedder:
    config = settings_of(args)
    embedder, _ = resolve_embedder(
        args.embedder, config.embedder_spec, api_key=config.openai_api_key
    )
    if embedder is None:
        raise ValidationError("a pack needs an embedding model: not --embedder none")
    return embedder


def _build(args: argparse.Namespace, out: TextIO) -> int:
    from vrom.pack_builder import build_pack

    target = Path(args.out or f"{args.pack_id}-{args.pack_version}")

    def progress(stage: str, done: int, total: int) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r{stage}: {done}" + (f"/{total}" if total else "") + "   ")

    manifest = build_pack(
        args.source,
        target,
        pack_id=args.pack_id,
        version=args.pack_version,
        embedder=_embedder(args),
        name=args.name,
        description=args.description,
        tags=[t.strip() for t in args.tags.split(",") if t.strip()],
        url_base=args.url_base,
        progress=progress,
        sign_key=args.sign,
    )
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    if args.json:
        print_json(manifest.to_dict(), out)
    else:
        size = sum(f.size for f in manifest.files.values()) / 1e6
        out.write(
            f"built {manifest.vrom_id} {manifest.version} in {target}: {manifest.total_chunks} "
            f"chunks, {manifest.vector_count} vectors ({manifest.model}), {size:.1f} MB"
            + (", signed\n" if args.sign else "\n")
        )
    return 0


def _publish(args: argparse.Namespace, out: TextIO) -> int:
    from vrom.pack_builder import publish_pack

    entry = publish_pack(
        args.pack_dir,
        args.registry_dir,
        base_url=args.base_url,
        official=args.official,
        sign_key=args.sign,
    )
    if args.json:
        print_json(entry.to_dict(), out)
    else:
        signed = f", signed by key {entry.key_id}" if entry.key_id else ", unsigned"
        out.write(f"published {entry.id} {entry.version} to {args.registry_dir}{signed}\n")
    return 0


def _keygen(args: argparse.Namespace, out: TextIO) -> int:
    from vrom.packs.signing import generate_key_pair

    pair = generate_key_pair(args.out, args.name)
    if args.json:
        print_json(
            {
                "key_id": pair.public_key.key_id,
                "public_key": pair.public_key.text,
                "private_key_file": str(pair.private_path),
                "public_key_file": str(pair.public_path),
            },
            out,
        )
        return 0
    out.write(
        f"wrote {pair.private_path} (private: keep it secret, sign with --sign) and "
        f"{pair.public_path}\nkey id {pair.public_key.key_id}, public key "
        f"{pair.public_key.text}\nreaders trust it with: "
        f"export {TRUSTED_KEYS_ENV}={pair.public_key.text}\n"
    )
    return 0


def _cache(args: argparse.Namespace) -> Any:
    """Return the pack cache of ``--registry`` (else ``$VROM_REGISTRY_URL``), ``$VROM_CACHE_DIR``,
    ``--trusted-keys`` (else ``$VROM_TRUSTED_KEYS``) and ``$VROM_CACHE_QUOTA``."""
    from vrom.packs.cache import VromCache

    config = settings_of(args)
    registry = getattr(args, "registry", None)
    registry = registry if registry is not None else config.registry_url
    given = getattr(args, "trusted_keys", None)
    keys = key_list(given) if given is not None else config.trusted_keys
    return VromCache(registry, config.cache_dir, trusted_keys=keys, quota=config.cache_quota)


def _list(args: argparse.Namespace, out: TextIO) -> int:
    cache = _cache(args)
    entries = cache.get_registry(refresh=args.refresh).packs
    rows = [{**e.to_dict(), "cached": cache.is_cached(e.id)} for e in entries]
    if args.json:
        print_json(rows, out)
        return 0
    for row in rows:
        mark = "cached" if row["cached"] else ""
        out.write(
            f"{row['id']:24} {row['version']:10} {row['vectors']:>9,} vectors  "
            f"{row['size_mb']:8.1f} MB  {row['model']}  {mark}\n"
        )
    if not rows:
        out.write("the registry lists no packs\n")
    return 0


def _pull(args: argparse.Namespace, out: TextIO) -> int:
    cache = _cache(args)
    entry = _entry(cache, args)
    show = sys.stderr.isatty() and not args.json
    if show:
        from rich.progress import Progress

        with Progress(transient=True, console=stderr_console()) as bar:
            task = bar.add_task(f"pulling {entry.id}", total=None)

            def progress(event: Any) -> None:
                bar.update(
                    task,
                    description=f"{entry.id}: {event.phase} {event.file}",
                    completed=event.loaded,
                    total=event.total or None,
                )

            pack = cache.pull(entry, on_progress=progress, force_download=args.force)
    else:
        pack = cache.pull(entry, force_download=args.force)
    if args.json:
        print_json(
            {
                "id": pack.id,
                "version": pack.version,
                "directory": str(pack.directory),
                "signed_by": pack.signed_by,
            },
            out,
        )
    else:
        signed = f" (signed by trusted key {pack.signed_by})" if pack.signed_by else ""
        out.write(f"{pack.id} {pack.version} is cached in {pack.directory}{signed}\n")
    return 0


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    pack = _cache(args).verify(args.pack)
    files = len(pack.manifest.files)
    if args.json:
        print_json(
            {
                "id": pack.id,
                "version": pack.version,
                "files": files,
                "verified": True,
                "signed_by": pack.signed_by,
            },
            out,
        )
        return 0
    signed = (
        f"; signed by trusted key {pack.signed_by}"
        if pack.signed_by
        else f" (no trusted keys set: its signature, if any, was not checked; see {TRUSTED_KEYS_ENV})"
    )
    out.write(f"{pack.id} {pack.version}: {files} files match their SHA-256{signed}\n")
    return 0


def _entry(cache: Any, args: argparse.Namespace) -> Any:
    """Return the registry entry of ``args.pack``, from a fresh registry with ``--refresh``
    (or ``--force``)."""
    if args.refresh or getattr(args, "force", False):
        cache.get_registry(refresh=True)
    return cache.require_entry(args.pack)


def _info(args: argparse.Namespace, out: TextIO) -> int:
    cache = _cache(args)
    entry = _entry(cache, args)
    manifest = cache.get_cached_manifest(entry.id)
    info = {
        "entry": entry.to_dict(),
        "cached": manifest is not None,
        "manifest": None if manifest is None else manifest.to_dict(),
    }
    if args.json:
        print_json(info, out)
        return 0
    out.write(f"{entry.id} {entry.version}: {entry.name}\n{entry.description}\n")
    out.write(f"{entry.vectors:,} vectors of {entry.dimensions} d ({entry.model}), ")
    out.write(f"{entry.size_mb:.1f} MB, {'cached' if manifest else 'not cached'}\n")
    out.write(
        f"signed by key {entry.key_id} (as the registry says)\n" if entry.key_id else "unsigned\n"
    )
    if manifest is not None:
        out.write(f"built {manifest.created_at}, corpus {manifest.corpus_hash}\n")
    return 0


def _evict(args: argparse.Namespace, out: TextIO) -> int:
    removed = _cache(args).evict(args.pack)
    if args.json:
        print_json({"id": args.pack, "evicted": removed}, out)
    else:
        out.write(f"{args.pack}: {'evicted' if removed else 'was not cached'}\n")
    return 0


def _storage(args: argparse.Namespace, out: TextIO) -> int:
    estimate = _cache(args).storage_estimate()
    if args.json:
        print_json(estimate, out)
        return 0
    packs = "1 pack uses" if estimate.packs == 1 else f"{estimate.packs} packs use"
    if estimate.limited:
        out.write(
            f"{packs} {estimate.used:,} bytes of a {estimate.quota:,}-byte quota "
            f"(${CACHE_QUOTA_ENV}); {estimate.free_bytes:,} bytes free on the disk\n"
        )
    else:
        out.write(
            f"{packs} {estimate.used:,} bytes; no quota (${CACHE_QUOTA_ENV}), so the disk "
            f"is the limit: {estimate.free_bytes:,} bytes free\n"
        )
    return 0


def search_pack(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``vrom search --pack ID QUERY``: mount the pack (pulling it if needed) and search."""
    from vrom.agent_memory import AgentMemory

    with (
        _warnings_on_stderr(),
        AgentMemory(registry_url=args.registry, settings=settings_of(args)) as memory,
    ):
        memory.init()
        status = memory.mount(args.pack)
        announce_text(f"pack {status.active_vrom} {status.version}")
        results = memory.search(args.query, top_k=min(args.k, 1000), mode=args.mode or "vector")
    if args.json:
        print_json(results, out)
        return 0
    style = styler(out)
    for rank, result in enumerate(results, start=1):
        where = result.metadata.get("source_file", "")
        heading = result.metadata.get("section_heading")
        if "score" in result.metadata:  # outside vector mode: the search's own score
            score = score_label(result.metadata.get("score_kind", ""), result.metadata["score"])
        else:
            score = score_label("distance", result.distance)
        out.write(style(f"{rank}. {where}", "bold") + (f" › {heading}" if heading else ""))
        out.write(f"  {style(f'({score})', 'cyan')}\n")
        out.write(f"   {' '.join(result.text.split())[:200]}\n")
    if not results:
        out.write("no results\n")
    return 0
