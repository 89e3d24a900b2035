"""The MCP server has the in-memory keyword copy made once its vault is indexed, beside the
searches, instead of waiting for searches to have paid for it in FTS5 time (issue 29, item 6):
a server is there to search. A process that only opens a vault does not copy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from vrom import Vault
from vrom.search.keyword import KeywordRanker
from vrom.server.state import ServerState

NOTES = {
    f"note {i}.md": f"# Note {i}\n\nThe walrus {i} swims past the lighthouse.\n" for i in range(30)
}


def test_the_server_has_the_keyword_copy_made_once_its_vault_is_indexed(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    root = write_vault(NOTES)
    state = ServerState(root, state_dir=tmp_path / "state", embedder=None, watch=False)
    try:
        vault = state.open_explicit()
        assert vault is not None
        ranker = vault.corpus.keyword
        copy = ranker.wait_for_copy()  # the build started by the server, before any search
        assert copy is not None, "made without a search"
        assert copy.version == ranker.version(), "of the index as it is now"
    finally:
        state.close()


def test_a_vault_opened_without_the_server_copies_only_once_searches_paid(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    root = write_vault(NOTES)
    with Vault.open(root, tmp_path / "state", embedder=None) as vault:
        vault.index()
        assert vault.corpus.keyword.wait_for_copy() is None, "no search, no copy"
        assert vault.corpus.keyword.prepare() is True, "started when asked"
        assert vault.corpus.keyword.wait_for_copy() is not None
        assert vault.corpus.keyword.prepare() is False, "current already: nothing to start"


def test_a_store_without_a_keyword_source_prepares_nothing() -> None:
    class NoSource:  # a DocumentStore that is no KeywordPostingsSource (PostgreSQL's kind)
        pass

    assert KeywordRanker(NoSource()).prepare() is False  # type: ignore[arg-type]
