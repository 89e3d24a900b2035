"""``vrom eval``: search quality and speed on a BEIR dataset, as a table or JSON."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from vrom.cli.global_options import add_global_options, settings_of
from vrom.cli.output import print_json
from vrom.evaluation import MODES, TARGETS, Evaluation, evaluate


def add_eval_command(commands: Any) -> None:
    """Add the ``eval`` command to the CLI's subcommands."""
    help_text = (
        "Measure search quality (nDCG, recall, MRR) and speed on a BEIR dataset, indexed into a "
        "temporary store."
    )
    sub = commands.add_parser("eval", help=help_text, description=help_text)
    sub.set_defaults(handler=_run_eval)
    sub.add_argument(
        "dataset",
        metavar="DATASET_DIR",
        help="a BEIR folder: corpus.jsonl, queries.jsonl and qrels/SPLIT.tsv",
    )
    sub.add_argument("--split", default="test", help="the qrels split to run (default: test)")
    sub.add_argument(
        "--mode",
        choices=(*MODES, "all"),
        default="all",
        help="the search mode to measure (default: all; --embedder none: keyword only)",
    )
    sub.add_argument(
        "--k",
        type=_positive,
        default=10,
        help="the cut-off of nDCG, recall and MRR (default: 10; recall@100 is always shown)",
    )
    sub.add_argument(
        "--limit-queries",
        type=_positive,
        default=None,
        metavar="N",
        help="run only the split's first N queries (a quick look; the corpus is always whole)",
    )
    sub.add_argument(
        "--as",
        dest="target",
        choices=TARGETS,
        default="collection",
        help="load the corpus into a collection (default) or as memories (remember, recall)",
    )
    sub.add_argument(
        "--reranker",
        default="none",
        metavar="SPEC",
        help="reorder each search's first 30 hits with this cross-encoder: onnx:DIR (a folder"
        " with model.onnx and tokenizer.json), default (the packaged one: none exists yet) or"
        " none (default: none)",
    )
    add_global_options(sub, ("json", "embedder"))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def _run_eval(args: argparse.Namespace, out: TextIO) -> int:
    show = sys.stderr.isatty()

    def progress(stage: str, done: int, total: int) -> None:
        sys.stderr.write(f"\r{stage}: {done:,}/{total:,}   ")
        sys.stderr.flush()

    try:
        evaluation = evaluate(
            args.dataset,
            split=args.split,
            modes=MODES if args.mode == "all" else (args.mode,),
            k=args.k,
            embedder=args.embedder,
            limit_queries=args.limit_queries,
            progress=progress if show else None,
            target=args.target,
            settings=settings_of(args),
            reranker=None if args.reranker == "none" else args.reranker,
        )
    finally:
        if show:
            sys.stderr.write("\r\x1b[K")  # clear the progress line
    if args.json:
        print_json(evaluation, out)
    else:
        out.write(_format_evaluation(evaluation))
    return 0


def _format_evaluation(evaluation: Evaluation) -> str:
    """Return the evaluation as a table of modes, with the index timings and notes below it."""
    k, index = evaluation.k, evaluation.index
    lines = [
        f"{evaluation.dataset} ({evaluation.split}): {evaluation.queries:,} queries, "
        f"{index.documents:,} documents"
        f"{' as memories' if evaluation.target == 'memories' else ''}; "
        f"embedder {evaluation.embedder or 'none'}"
        f"{'' if evaluation.reranker is None else f'; reranker {evaluation.reranker}'}",
        "",
        f"{'mode':<8} {f'nDCG@{k}':>8} {f'R@{k}':>7} {'R@100':>7} {f'MRR@{k}':>7} "
        f"{'index kw s':>10} {'index emb s':>11} {'p50 ms':>7} {'p95 ms':>7}",
    ]
    for r in evaluation.results:
        embedding = "-" if r.index_embedding_s is None else f"{r.index_embedding_s:.2f}"
        lines.append(
            f"{r.mode:<8} {r.ndcg:>8.4f} {r.recall:>7.4f} {r.recall_100:>7.4f} {r.mrr:>7.4f} "
            f"{r.index_keyword_s:>10.2f} {embedding:>11} {r.latency_p50_ms:>7.1f} "
            f"{r.latency_p95_ms:>7.1f}"
        )
    split = (
        f": keyword part {index.keyword_s:.2f} s, embedding part (inside the model) "
        f"{index.embedding_s:.2f} s"
        if index.embedding_s is not None
        else ""
    )
    lines += ["", f"indexed {index.documents:,} documents in {index.total_s:.2f} s{split}"]
    lines += [f"note: {note}" for note in evaluation.notes]
    return "\n".join(lines) + "\n"
