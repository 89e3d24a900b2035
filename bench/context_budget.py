"""How well ``vrom context`` uses its token budget on a real vault: repeated text and distinct text.

    python bench/context_budget.py [--vault ../shared/data/vault/obsidian-hub]
        [--max-tokens 2000] [--out FILE]

Indexes the vault by keyword (no model; into a temporary state directory), then builds a context
for each of ten questions, with and without ``--expand-context``, and counts the sentences of
each context's passages (headers and sources left out): the share of the text that repeats a
sentence given earlier in the same context, and the characters of distinct text it holds. A
context that repeats nothing and fills its budget with distinct text scores 0% and the most
characters. Also runs the same contexts with the relative cut-off off (``relative_cutoff=None``)
to show what it leaves out. Writes JSON to bench/results/context_budget.json.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import statistics
import tempfile
from pathlib import Path
from typing import Any

from vrom import Vault

QUESTIONS = [
    "plugin settings",
    "daily notes template",
    "sync vault mobile",
    "dataview query",
    "graph view",
    "keyboard shortcuts",
    "themes css snippets",
    "backlinks",
    "markdown tables",
    "publish website",
]
DEFAULT_VAULT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "vault"
MIN_SENTENCE_CHARS = 30


def _sentences(text: str) -> list[str]:
    body = text.split("\n\nSources:\n")[0]
    body = re.sub(r"^\[\d+\] .*$", "", body, flags=re.MULTILINE)  # passage headers
    parts = re.split(r"(?<=[.!?\n])\s+", body)
    return [s.strip() for s in parts if len(s.strip()) >= MIN_SENTENCE_CHARS]


def _measure(text: str) -> tuple[float, int]:
    """Return the share of characters in repeated sentences, and the distinct characters."""
    seen: set[str] = set()
    repeated = total = 0
    for sentence in _sentences(text):
        total += len(sentence)
        if sentence in seen:
            repeated += len(sentence)
        seen.add(sentence)
    return (repeated / total if total else 0.0), total - repeated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", type=Path, default=DEFAULT_VAULT / "obsidian-hub")
    parser.add_argument("--max-tokens", type=int, default=2000)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "context_budget.json"
    )
    args = parser.parse_args(argv)
    if not args.vault.is_dir():
        parser.error(f"no vault at {args.vault}")
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="vrom-context-") as state,
        Vault.open(args.vault, state, embedder=None) as vault,
    ):
        vault.index()
        # a checkout from before the cut-off (a baseline run) has no relative_cutoff
        can_cut = "relative_cutoff" in inspect.signature(vault.context).parameters
        for question in QUESTIONS:
            for expand in (False, True):
                context = vault.context(question, max_tokens=args.max_tokens, expand_context=expand)
                uncut = (
                    vault.context(
                        question,
                        max_tokens=args.max_tokens,
                        expand_context=expand,
                        relative_cutoff=None,
                    )
                    if can_cut
                    else context
                )
                share, distinct = _measure(context.text)
                rows.append(
                    {
                        "question": question,
                        "expand_context": expand,
                        "tokens": context.tokens,
                        "passages": len(context.sources),
                        "repeated_share": round(share, 4),
                        "distinct_chars": distinct,
                        "passages_without_cutoff": len(uncut.sources),
                    }
                )
    shares = [row["repeated_share"] for row in rows]
    distinct = [row["distinct_chars"] for row in rows]
    result = {
        "vault": str(args.vault),
        "max_tokens": args.max_tokens,
        "contexts": len(rows),
        "repeated_share_mean": round(statistics.mean(shares), 4),
        "repeated_share_max": max(shares),
        "distinct_chars_mean": round(statistics.mean(distinct)),
        "passages_mean": round(statistics.mean(row["passages"] for row in rows), 2),
        "passages_without_cutoff_mean": round(
            statistics.mean(row["passages_without_cutoff"] for row in rows), 2
        ),
        "rows": rows,
    }
    for key, value in result.items():
        if key != "rows":
            print(f"{key:30} {value}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
