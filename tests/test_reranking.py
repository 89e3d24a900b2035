"""The reranking stage: a search's first candidates reordered by a cross-encoder's scores.

No cross-encoder ships in a package (docs/models.md), so the model here is a small ONNX graph
built for the test with its own ``tokenizer.json``: it scores a pair as the sum of fixed word
weights over the passage's tokens (token type 1), which the test computes itself from the
same weights. It runs through `vrom.embed.onnx.OnnxReranker` as a real model would.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from vrom_cli import run_vrom

from vrom import Collection, Embedder, ModelError, Reranker, ValidationError, Vault
from vrom.embed.onnx import OnnxReranker
from vrom.embed.rerank import NO_PACKAGED_RERANKER, FakeReranker, Reranking

onnx = pytest.importorskip("onnx")  # a test extra: `pip install -e '.[test]'`
from onnx import TensorProto, helper  # noqa: E402
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors  # noqa: E402

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
WORDS = [
    "backup",
    "restore",
    "router",
    "firmware",
    "reset",
    "password",
    "printer",
    "paper",
    "jam",
    "vacation",
    "policy",
    "days",
    "office",
    "coffee",
    "machine",
    "descale",
    "weekly",
    "the",
    "a",
    "of",
    "and",
    "how",
    "to",
    "do",
    "i",
    "my",
    "is",
]
DOCS = [
    ("router", "Router firmware: reset the router and restore its firmware from a backup."),
    ("printer", "Printer paper jam: open the tray and pull the paper out."),
    ("vacation", "Vacation policy: twenty days a year, asked for a month ahead."),
    ("coffee", "Coffee machine: descale it weekly and the office keeps it clean."),
    ("password", "Password reset: the office desk resets a password in a day."),
]


def _cross_encoder(folder: Path, weights: dict[str, float], logits: int = 1) -> Path:
    """Write ``model.onnx`` and ``tokenizer.json`` of a cross-encoder scoring a pair as the sum
    of ``weights`` over its passage's words (``logits`` 2: that sum as the second class, 0 as
    the first)."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {token: i for i, token in enumerate(SPECIAL + WORDS)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()  # an uncased model's
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    table = np.zeros(len(vocab), dtype=np.float32)
    for word, weight in weights.items():
        table[vocab[word]] = weight
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["weighted"], axis=0),
        helper.make_node("Mul", ["attention_mask", "token_type_ids"], ["passage_int"]),
        helper.make_node("Cast", ["passage_int"], ["passage"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["weighted", "passage"], ["kept"]),
        helper.make_node("ReduceSum", ["kept", "axis"], ["score"], keepdims=1),
    ]
    initializers = [
        helper.make_tensor("table", TensorProto.FLOAT, [len(vocab)], table.tolist()),
        helper.make_tensor("axis", TensorProto.INT64, [1], [1]),
    ]
    output = "score"
    if logits == 2:
        nodes.append(helper.make_node("Mul", ["score", "zero"], ["not_relevant"]))
        nodes.append(helper.make_node("Concat", ["not_relevant", "score"], ["logits"], axis=1))
        initializers.append(helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0]))
        output = "logits"
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    graph = helper.make_graph(
        nodes,
        "cross-encoder",
        inputs,
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", logits])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(folder / "model.onnx"))
    return folder


def _expected(weights: dict[str, float], passage: str) -> float:
    """What the model scores a passage: its words' weights summed, as the test knows them."""
    words = passage.lower().replace(":", " ").replace(".", " ").replace(",", " ").split()
    return float(sum(weights.get(word, 0.0) for word in words))


@pytest.fixture
def documents(tmp_path: Path) -> Collection:
    collection = Collection.open("docs", embedder=Embedder.fake(32), storage=tmp_path / "c")
    collection.add([{"id": i, "text": text} for i, text in DOCS])
    yield collection
    collection.close()


def _reranking(collection: Collection, reranker: Reranker) -> Collection:
    collection._corpus.reranking = Reranking(reranker)
    return collection


def test_the_onnx_cross_encoder_scores_each_pair_as_its_graph_computes(tmp_path: Path) -> None:
    weights = {"reset": 2.0, "router": 1.5, "paper": -1.0, "office": 0.25}
    reranker = Reranker.from_spec(f"onnx:{_cross_encoder(tmp_path / 'm', weights)}")
    assert isinstance(reranker, OnnxReranker) and reranker.name == "onnx:m"
    passages = [text.lower() for _, text in DOCS] + ["reset reset the router"]
    scores = reranker.score("how do i reset my router", passages)
    assert scores.dtype == np.float32
    assert scores.tolist() == pytest.approx([_expected(weights, p) for p in passages])
    assert reranker.score("anything", []).shape == (0,)


def test_a_two_class_model_scores_by_its_relevant_class(tmp_path: Path) -> None:
    weights = {"printer": 3.0, "jam": 1.0}
    reranker = OnnxReranker.from_dir(_cross_encoder(tmp_path / "m2", weights, logits=2))
    passages = ["printer paper jam", "coffee machine", "printer"]
    assert reranker.score("printer", passages).tolist() == pytest.approx([4.0, 0.0, 3.0])


def test_a_long_pair_loses_the_end_of_its_passage_not_the_query(tmp_path: Path) -> None:
    reranker = OnnxReranker.from_dir(_cross_encoder(tmp_path / "m", {"reset": 1.0}), max_tokens=8)
    # [CLS] q q [SEP] p p p [SEP]: three passage tokens fit, whatever follows is cut
    assert reranker.score("router firmware", ["reset reset reset reset reset"]).tolist() == [3.0]


def test_a_reranked_search_comes_in_the_rerankers_order(
    documents: Collection, tmp_path: Path
) -> None:
    weights = {"coffee": 5.0, "descale": 1.0, "vacation": 3.0, "router": -2.0, "password": 0.5}
    reranker = OnnxReranker.from_dir(_cross_encoder(tmp_path / "m", weights))
    plain = documents.search("router reset password", k=5, mode="hybrid")
    assert plain.reranker is None and plain.rerank_ms is None
    reranked = _reranking(documents, reranker).search(
        "router reset password", k=3, mode="hybrid", rerank=True
    )
    texts = {doc_id: text for doc_id, text in DOCS}
    read = {
        hit.id: f"{hit.title}\n{hit.chunk_text}" if hit.title else hit.chunk_text for hit in plain
    }
    expected = sorted(  # a stable sort: equal scores keep the search's order
        (hit.id for hit in plain), key=lambda doc_id: -_expected(weights, str(read[doc_id]))
    )
    assert len({_expected(weights, str(text)) for text in read.values()}) == len(read)
    assert [hit.id for hit in reranked] == expected[:3]
    before = {hit.id: hit.score for hit in plain}
    for hit in reranked:
        assert hit.score_kind == "reranker"
        assert hit.score == pytest.approx(hit.scores["reranker"])
        assert hit.scores["before_rerank"] == pytest.approx(before[hit.id])
        assert hit.text == texts[hit.id]  # the collection's whole-document view, as before
    assert reranked.reranker == "onnx:m" and reranked.rerank_ms is not None
    assert reranked.rerank_ms >= 0 and reranked.mode == "hybrid"


def test_only_the_first_candidates_are_reranked(documents: Collection, tmp_path: Path) -> None:
    reranker = OnnxReranker.from_dir(_cross_encoder(tmp_path / "m", {"coffee": 9.0}))
    plain = [hit.id for hit in documents.search("router reset password", k=5, mode="hybrid")]
    assert plain.index("coffee") >= 2  # the model's favourite is not among the first two
    _reranking(documents, reranker)
    two = documents.search("router reset password", k=1, mode="hybrid", rerank=2)
    assert [hit.id for hit in two] == plain[:1]  # both score 0: the search's order holds
    five = documents.search("router reset password", k=1, mode="hybrid", rerank=5)
    assert [hit.id for hit in five] == ["coffee"]


def test_equal_scores_keep_the_searchs_order(documents: Collection) -> None:
    plain = documents.search("zzz", k=5, mode="vector")
    reranked = _reranking(documents, FakeReranker()).search("zzz", k=5, mode="vector", rerank=True)
    assert len(reranked) == len(plain) == 5
    assert [hit.score for hit in reranked] == [0.0] * 5  # no word of the query in any
    assert [hit.id for hit in reranked] == [hit.id for hit in plain]


def test_a_filter_holds_under_reranking(documents: Collection) -> None:
    documents.add([{"id": "kept", "text": "Router reset kept here.", "metadata": {"team": "it"}}])
    reranked = _reranking(documents, FakeReranker()).search(
        "router reset", k=5, where={"team": "it"}, mode="hybrid", rerank=True
    )
    assert [hit.id for hit in reranked] == ["kept"]


def test_reports_are_equal_whatever_the_reranking_took(documents: Collection) -> None:
    _reranking(documents, FakeReranker())
    one = documents.search("printer paper", k=3, mode="keyword", rerank=True)
    two = documents.search("printer paper", k=3, mode="keyword", rerank=True)
    assert one == two and one.reranker == "fake"
    assert one != documents.search("printer paper", k=3, mode="keyword")


@pytest.mark.parametrize("bad", [0, -1, 1001, "yes", 2.5, None])
def test_rerank_takes_true_false_or_a_count(documents: Collection, bad: object) -> None:
    _reranking(documents, FakeReranker())
    with pytest.raises(ValidationError, match="rerank must be"):
        documents.search("printer", rerank=bad)  # type: ignore[arg-type]


def test_reranking_without_a_reranker_says_how_to_configure_one(documents: Collection) -> None:
    with pytest.raises(ValidationError, match=r"none is configured.*reranker="):
        documents.search("printer", rerank=True)
    assert documents.search("printer", rerank=False) == documents.search("printer")


def test_reranker_specs(tmp_path: Path) -> None:
    assert Reranker.from_spec("none") is None
    assert isinstance(Reranker.from_spec("fake"), FakeReranker)
    with pytest.raises(ModelError) as raised:
        Reranker.from_spec("default")
    assert str(raised.value) == NO_PACKAGED_RERANKER and "\n" not in NO_PACKAGED_RERANKER
    assert "onnx:DIR" in NO_PACKAGED_RERANKER
    for bad in ("nope", "onnx:", "fake:1", "default:x"):
        with pytest.raises(ValidationError, match="unknown reranker"):
            Reranker.from_spec(bad)
    with pytest.raises(ModelError, match="no ONNX model"):
        Reranker.from_spec(f"onnx:{tmp_path / 'missing'}")


def test_a_collection_opened_with_a_spec_reranks_and_closes_its_model(tmp_path: Path) -> None:
    folder = _cross_encoder(tmp_path / "m", {"vacation": 2.0})
    with Collection.open(
        "spec", embedder=None, storage=tmp_path / "s", reranker=f"onnx:{folder}"
    ) as collection:
        collection.add([{"id": i, "text": text} for i, text in DOCS])
        report = collection.search("policy days vacation", k=2, rerank=True)
        assert report[0].id == "vacation" and report.reranker == "onnx:m"
    with pytest.raises(ValidationError, match="unknown reranker"):
        Collection.open("bad", embedder=None, storage=tmp_path / "b", reranker="nope")


class _Broken(Reranker):
    """A reranker that answers wrongly: too few scores, or a score that is not a number."""

    name = "broken"

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores

    def _score(self, query: str, passages: list[str]) -> list[float]:
        return self.scores


@pytest.mark.parametrize(
    ("scores", "message"),
    [([1.0], "gave 1 scores for 5 passages"), ([0.0, 1.0, float("nan"), 0.0, 0.0], "finite")],
)
def test_a_reranker_that_answers_wrongly_is_a_model_error(
    documents: Collection, scores: list[float], message: str
) -> None:
    _reranking(documents, _Broken(scores))
    with pytest.raises(ModelError, match=message):
        documents.search("router", k=5, mode="vector", rerank=True)


def test_ef_search_is_checked_against_k_and_widened_to_the_candidates(
    documents: Collection,
) -> None:
    _reranking(documents, FakeReranker())
    assert len(documents.search("router reset", k=2, ef_search=2, mode="vector", rerank=5)) == 2
    with pytest.raises(ValidationError, match="ef_search"):
        documents.search("router reset", k=2, ef_search=1, mode="vector", rerank=5)


def test_a_vault_search_and_its_memories_rerank_with_the_vaults_reranker(
    write_vault, tmp_path: Path
) -> None:
    root = write_vault({f"{doc_id}.md": f"# {doc_id}\n{text}\n" for doc_id, text in DOCS})
    folder = _cross_encoder(tmp_path / "m", {"vacation": 4.0, "coffee": 2.0})
    with Vault.open(
        root, tmp_path / "state", embedder=Embedder.fake(32), reranker=f"onnx:{folder}"
    ) as vault:
        vault.index()
        vault.embed()
        plain = vault.search("reset router", k=5, per_note=True)
        report = vault.search("reset router", k=2, per_note=True, rerank=True)
        assert [hit.path for hit in report] == ["vacation.md", "coffee.md"]
        assert report.reranker == "onnx:m" and report.mode == plain.mode
        assert all(hit.fresh for hit in report)  # the vault's own finishing still runs
        memories = vault.memories
        memories.remember("Holidays", "The vacation policy gives twenty days.")
        memories.remember("Router", "Reset the router from its backup.")
        assert memories.search("router reset", k=1)[0].title == "Router"
        reranked = memories.search("router reset", k=1, rerank=True)
        assert reranked[0].title == "Holidays" and reranked.reranker == "onnx:m"
        assert memories.recall("router reset", k=1)[0].memory.title == "Router"
        recalled = memories.recall("router reset", k=2, rerank=True)
        assert [hit.memory.title for hit in recalled] == ["Holidays", "Router"]
        assert recalled[0].score_kind == "reranker" and recalled[0].score == 4.0
        assert "before_rerank" in recalled[1].scores


def test_a_bad_reranker_spec_opens_no_store(write_vault, tmp_path: Path) -> None:
    root = write_vault({"a.md": "# A\ntext\n"})
    with pytest.raises(ValidationError, match="unknown reranker"):
        Vault.open(root, tmp_path / "state", embedder=None, reranker="nope")
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").rglob("*.db"))


def test_the_cli_reranks_with_the_reranker_it_is_given(write_vault, tmp_path: Path) -> None:
    root = write_vault({f"{doc_id}.md": f"# {doc_id}\n{text}\n" for doc_id, text in DOCS})
    folder = _cross_encoder(tmp_path / "m", {"password": 4.0, "coffee": 9.0})
    state = tmp_path / "cli-state"  # keyword only: coffee is no candidate, whatever it scores
    assert run_vrom(state, "index", str(root)).returncode == 0
    search = ("--vault", str(root), "search", "--json", "reset router", "-k", "2")
    found = run_vrom(state, *search, "--rerank", "--reranker", f"onnx:{folder}")
    assert found.returncode == 0, found.stderr
    report = json.loads(found.stdout)
    assert [hit["path"] for hit in report["results"]] == ["password.md", "router.md"]
    assert report["reranker"] == "onnx:m" and report["rerank_ms"] >= 0
    assert report["results"][0]["score_kind"] == "reranker"
    assert "reranked by onnx:m in " in found.stderr
    plain = json.loads(run_vrom(state, *search).stdout)
    assert plain["results"][0]["path"] == "router.md" and plain["reranker"] is None
    for flags, said in (
        (("--rerank",), NO_PACKAGED_RERANKER),
        (("--reranker", f"onnx:{folder}"), "add --rerank"),
        (("--rerank", "0", "--reranker", f"onnx:{folder}"), "not positive"),
    ):
        refused = run_vrom(state, *search, *flags)
        assert refused.returncode != 0 and said in refused.stderr, refused.stderr


def test_vault_search_over_mcp_reranks_with_the_servers_reranker(
    write_vault, tmp_path: Path
) -> None:
    pytest.importorskip("mcp")
    from mcp import Client, StdioServerParameters

    root = write_vault({f"{doc_id}.md": f"# {doc_id}\n{text}\n" for doc_id, text in DOCS})
    folder = _cross_encoder(tmp_path / "m", {"password": 4.0})
    env = {**os.environ, "VROM_STATE_DIR": str(tmp_path / "state"), "VROM_EMBEDDER": "none"}

    def served(*extra: str) -> StdioServerParameters:
        command = ["-m", "vrom", "mcp", "--vault", str(root), "--no-watch", *extra]
        return StdioServerParameters(command=sys.executable, args=command, env=env)

    async def main() -> None:
        query = {"query": "reset router", "k": 2}
        async with Client(served("--reranker", f"onnx:{folder}"), mode="legacy") as client:
            plain = (await client.call_tool("vault_search", query)).structured_content
            assert [hit["path"] for hit in plain["results"]] == ["router.md", "password.md"]
            assert "reranker" not in plain  # null fields are left out
            result = await client.call_tool("vault_search", {**query, "rerank": True})
            assert not result.is_error, result.content[0].text
            reranked = result.structured_content
            assert [hit["path"] for hit in reranked["results"]] == ["password.md", "router.md"]
            assert reranked["reranker"] == "onnx:m" and reranked["rerank_ms"] >= 0
            await client.call_tool(
                "vault_remember", {"title": "Leave", "content": "The password is reset yearly."}
            )
            await client.call_tool(
                "vault_remember", {"title": "Router", "content": "Reset the router weekly."}
            )
            asked = {"query": "router reset", "k": 1}
            first = (await client.call_tool("vault_recall", asked)).structured_content
            assert first["results"][0]["memory"]["title"] == "Router"
            recalled = await client.call_tool("vault_recall", {**asked, "rerank": True})
            assert not recalled.is_error, recalled.content[0].text
            best = recalled.structured_content["results"][0]
            assert best["memory"]["title"] == "Leave" and best["score_kind"] == "reranker"
            asked_context = {"query": "reset router", "rerank": True}
            context = await client.call_tool("vault_context", asked_context)
            assert not context.is_error, context.content[0].text
            sources = context.structured_content["sources"]
            assert sources[0]["path"] == "password.md"
        async with Client(served(), mode="legacy") as client:
            refused = await client.call_tool("vault_search", {**query, "rerank": True})
            assert refused.is_error and "none is configured" in refused.content[0].text

    asyncio.run(main())


def test_vrom_mcp_with_a_bad_reranker_stops_before_serving(write_vault, tmp_path: Path) -> None:
    root = write_vault({"a.md": "# A\ntext\n"})
    refused = run_vrom(tmp_path / "state", "mcp", "--vault", str(root), "--reranker", "nope")
    assert refused.returncode != 0 and "unknown reranker 'nope'" in refused.stderr


def test_hits_past_the_candidates_follow_in_the_searchs_order(
    documents: Collection, tmp_path: Path
) -> None:
    plain = [hit.id for hit in documents.search("router reset password", k=5, mode="hybrid")]
    favourite = {plain[1]: 1.0, plain[4]: 9.0}  # a word each: the documents' ids are words
    _reranking(documents, OnnxReranker.from_dir(_cross_encoder(tmp_path / "m", favourite)))
    report = documents.search("router reset password", k=5, mode="hybrid", rerank=2)
    assert [hit.id for hit in report] == [plain[1], plain[0], *plain[2:]]
    assert [hit.score_kind for hit in report][:2] == ["reranker"] * 2
    assert "reranker" not in report[2].scores  # not a candidate: as the search gave it


def _beir(folder: Path) -> Path:
    """Write a BEIR folder of `DOCS`: one query whose relevant document keyword search ranks
    second (the router note holds both words, the password note only "reset")."""
    folder.mkdir(parents=True)
    lines = [json.dumps({"_id": i, "title": "", "text": text}) for i, text in DOCS]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "router reset"}) + "\n")
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\tpassword\t1\n")
    return folder


def test_vrom_eval_measures_a_reranker(tmp_path: Path) -> None:
    folder = _cross_encoder(tmp_path / "m", {"password": 5.0})
    data = _beir(tmp_path / "tiny")
    command = ("eval", str(data), "--mode", "keyword", "--json")
    plain = run_vrom(tmp_path / "s", *command)
    assert plain.returncode == 0, plain.stderr
    reranked = run_vrom(tmp_path / "s", *command, "--reranker", f"onnx:{folder}")
    assert reranked.returncode == 0, reranked.stderr
    before, after = json.loads(plain.stdout), json.loads(reranked.stdout)
    assert before["reranker"] is None and after["reranker"] == "onnx:m"
    assert before["results"][0]["mrr"] == 0.5 and after["results"][0]["mrr"] == 1.0
    as_memories = run_vrom(
        tmp_path / "s", *command, "--as", "memories", "--reranker", f"onnx:{folder}"
    )
    assert as_memories.returncode == 0, as_memories.stderr
    recalled = json.loads(as_memories.stdout)
    assert recalled["target"] == "memories" and recalled["reranker"] == "onnx:m"
    assert recalled["results"][0]["mrr"] == 1.0


def test_a_context_is_built_from_the_reranked_hits(documents: Collection, tmp_path: Path) -> None:
    _reranking(documents, OnnxReranker.from_dir(_cross_encoder(tmp_path / "m", {"coffee": 5.0})))
    plain = documents.context("router reset password", max_tokens=200, k=5, mode="hybrid")
    reranked = documents.context(
        "router reset password", max_tokens=200, k=5, mode="hybrid", rerank=True
    )
    assert plain.sources[0].id != "coffee" and reranked.sources[0].id == "coffee"


def test_a_reranked_context_keeps_hits_whatever_their_logits(documents: Collection) -> None:
    # logits have no scale: a relative cut-off (a share of the best score) would keep only
    # the hits above it, here none but the best
    _reranking(documents, _Broken([2.0, -5.0, -6.0, -7.0, -8.0]))
    context = documents.context("router", max_tokens=2000, k=5, mode="vector", rerank=True)
    assert len(context.sources) == 5
