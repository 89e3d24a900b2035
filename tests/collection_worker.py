"""A process of the collection concurrency test: one machine of several sharing a collection.

    python collection_worker.py writer|reader NAME STORAGE COLLECTION SECONDS BARRIER PROCESSES OUT

STORAGE is the collection's SQLite file or a PostgreSQL URL (the collection is then the
namespace COLLECTION). Each process opens the collection, and the store under it (memories and
snapshot reads), itself, as another machine would. Once all PROCESSES are open (BARRIER/ready)
they run together for SECONDS (and at least `MIN_ROUNDS` rounds, however slow the machine);
each then waits for all to be done (BARRIER/done), reads the count, and writes its report to OUT
as JSON (see `Writer.report`, `Reader.report`).

Each writer adds documents of its own (``w1-0``, ``w1-1``...), replaces and removes some of
them, and also writes documents both writers share (``s-N``): two machines adding and rewriting
one document at once. Every document's text and metadata follow from its id, the writer of the
version and its number (`document_text`), and every memory's from its writer and number
(`memory_texts`), so a reader can tell whether what it reads is a version some writer wrote,
whole: a document's chunks and vectors of one version, its row and text agreeing, and nothing
older than what it saw before (no writer's version of a document going back, no removed document
coming back, no writer's newest document vanishing). What readers saw goes in their reports, so
the test checks it was all acknowledged by a writer.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from vrom import Collection, Embedder, Hit, VromError
from vrom.memories import Memories, Memory
from vrom.store import Store, is_server_url, open_store

MIN_ROUNDS = 20
"""Rounds every process runs at least: each kind of write and read happens, even on a slow
machine, so the test never depends on how fast it is."""
BATCH = 3
"""New documents a writer adds per round (one transaction)."""
SHARED_SLOT_SECONDS = 0.5
"""Each round a writer writes the shared document of the current half second (``s-N``, N the
clock's half seconds): both writers add it, at about the same moment, then rewrite it."""
BARRIER_SECONDS = 300.0
"""How long a process waits for the others at a barrier before it reports that it gave up."""
MAX_ERRORS_KEPT = 20
CHUNK_CHARS, CHUNK_OVERLAP = 120, 20  # about three chunks a document
EMBEDDER_DIMS = 16
QUERY = "a note about shared topics"
TOPICS = ("harbour", "glacier", "orchard", "lantern", "meadow", "quarry", "beacon", "canyon")
_DOCUMENT_ID = re.compile(r"^(w\d+|s)-(\d+)$")
_TEXT_HEAD = re.compile(r"^((?:w\d+|s)-\d+) version (\d+) by (w\d+) part 0:")
_MEMORY_TITLE = re.compile(r"^(w\d+) memory (\d+)$")


# -- what writers write: a function of id and version ---------------------------------------


def document_id(owner: str, n: int) -> str:
    """Return the id of the ``n``-th document of a writer, or of the shared ones (``s``)."""
    return f"{owner}-{n}"


def parse_document_id(doc_id: str) -> tuple[str, int]:
    """Return (owner, n) of a document id (owner ``s``: shared); ValueError for an id no
    writer makes."""
    match = _DOCUMENT_ID.match(doc_id)
    if match is None:
        raise ValueError(f"no writer makes the id {doc_id!r}")
    return match[1], int(match[2])


def document_text(doc_id: str, writer: str, version: int) -> str:
    """Return the text of ``writer``'s version ``version`` of a document: three paragraphs,
    each naming it."""
    _, n = parse_document_id(doc_id)
    return "\n\n".join(
        f"{doc_id} version {version} by {writer} part {i}: {QUERY},"
        f" the {TOPICS[(n + version + i) % 8]} and the {TOPICS[(3 * n + i) % 8]}."
        for i in range(3)
    )


def document_metadata(doc_id: str, writer: str, version: int) -> dict[str, Any]:
    """Return the metadata of ``writer``'s version ``version`` of a document."""
    owner, n = parse_document_id(doc_id)
    return {"owner": owner, "n": n, "writer": writer, "v": version}


def version_of(metadata: Any, doc_id: str) -> tuple[str, int]:
    """Return (writer, version) of a document's metadata; `Inconsistent` unless it is the
    metadata of a version some writer makes."""
    writer, version = metadata.get("writer"), metadata.get("v")
    expect(
        isinstance(writer, str)
        and isinstance(version, int)
        and metadata == document_metadata(doc_id, writer, version),
        f"{doc_id} has metadata {metadata}",
    )
    return writer, version


def memory_texts(writer: str, m: int) -> tuple[str, str]:
    """Return the title and content of writer's ``m``-th memory."""
    return f"{writer} memory {m}", f"memory {m} of {writer}: about shared topics, {TOPICS[m % 8]}"


def sha256(text: str) -> str:
    """Return the hex SHA-256 of a text's UTF-8 (a document's content hash)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def open_all(storage: str, collection: str) -> tuple[Collection, Store, Memories]:
    """Open the collection, its store and its memories as one machine would."""
    embedder = Embedder.fake(EMBEDDER_DIMS)
    docs = Collection.open(
        collection,
        embedder=embedder,
        storage=storage,
        chunk_chars=CHUNK_CHARS,
        chunk_overlap=CHUNK_OVERLAP,
    )
    store = open_store(storage, namespace=collection if is_server_url(storage) else None)
    return docs, store, Memories(store, embedder)


class Inconsistent(Exception):
    """A read saw something no single committed state holds."""


def expect(condition: bool, message: str) -> None:
    """Raise `Inconsistent` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise Inconsistent(message)


# -- writers ---------------------------------------------------------------------------------


class Writer:
    """Adds documents, replaces and removes some of its own, writes the shared ones, remembers
    and archives memories; keeps every write the store acknowledged."""

    def __init__(self, name: str, docs: Collection, memories: Memories) -> None:
        self.name, self.docs, self.memories = name, docs, memories
        self.rng = random.Random(name)
        self.live: dict[str, int] = {}  # own id -> its last acknowledged version
        self.shared: dict[str, int] = {}  # shared id -> this writer's last acknowledged version
        self.acknowledged: list[tuple[str, str, int]] = []  # every (id, writer, version) added
        self.removed: list[str] = []
        self.memory_status: dict[str, tuple[int, str]] = {}  # memory id -> (number, status)
        self.next_n = 0
        self.counts: Counter[str] = Counter()

    def round(self, number: int) -> None:
        """Write one round: a batch of new documents, and now and then the other writes."""
        batch = [document_id(self.name, self.next_n + i) for i in range(BATCH)]
        self._add([(doc_id, 0) for doc_id in batch])
        for doc_id in batch:
            self.live[doc_id] = 0
        self.next_n += BATCH
        self.counts["adds"] += len(batch)
        shared = document_id("s", int(time.time() / SHARED_SLOT_SECONDS))
        version = self.shared.get(shared, -1) + 1
        self._add([(shared, version)])
        self.shared[shared] = version
        self.counts["shared writes"] += 1
        if number % 3 == 2:
            self._replace()
        if number % 4 == 3:
            self._remove()
        if number % 5 == 4:
            self._remember()
        if number % 10 == 9:
            self._archive()

    def _add(self, versions: list[tuple[str, int]]) -> None:
        """Add this writer's versions of documents; they are acknowledged once add returns."""
        w = self.name
        self.docs.add(
            [
                {"id": i, "text": document_text(i, w, v), "metadata": document_metadata(i, w, v)}
                for i, v in versions
            ]
        )
        self.acknowledged += [(doc_id, w, version) for doc_id, version in versions]

    def _replace(self) -> None:
        doc_id = self.rng.choice(sorted(self.live))
        version = self.live[doc_id] + 1
        self._add([(doc_id, version)])
        self.live[doc_id] = version
        self.counts["replaces"] += 1
        # read your own write: any connection of this process sees it at once
        writer, n = parse_document_id(doc_id)
        hits = self.docs.search(QUERY, k=1, where={"owner": writer, "n": n}, mode="keyword")
        self.counts["searches"] += 1
        expect(
            [(h.id, h.metadata.get("v")) for h in hits] == [(doc_id, version)],
            f"{doc_id} version {version} was acknowledged, then a search found"
            f" {[(h.id, h.metadata) for h in hits]}",
        )

    def _remove(self) -> None:
        # never the newest document: readers check a writer's newest never goes back
        newest = document_id(self.name, self.next_n - 1)
        doc_id = self.rng.choice(sorted(set(self.live) - {newest}))
        expect(self.docs.remove(doc_id), f"{doc_id} was live, yet remove found nothing")
        del self.live[doc_id]
        self.removed.append(doc_id)
        self.counts["removes"] += 1

    def _remember(self) -> None:
        m = len(self.memory_status)
        title, content = memory_texts(self.name, m)
        memory = self.memories.remember(
            title, content, type="fact", project="concurrency", tags=[self.name]
        )
        self.memory_status[memory.id] = (m, "active")
        self.counts["memories"] += 1

    def _archive(self) -> None:
        active = sorted(i for i, (_, status) in self.memory_status.items() if status == "active")
        if not active:
            return
        memory_id = self.rng.choice(active)
        archived = self.memories.archive(memory_id)
        expect(archived.status == "archived", f"{memory_id} archived, yet {archived.status}")
        self.memory_status[memory_id] = (self.memory_status[memory_id][0], "archived")
        self.counts["archives"] += 1

    def report(self) -> dict[str, Any]:
        """Return what this writer wrote, acknowledged: ``live`` (own id → last version),
        ``shared`` (shared id → its last version of it), ``acknowledged`` ([id, writer,
        version]), ``removed``, ``memories`` (id → [number, status]) and ``counts`` (of each
        kind of write)."""
        return {
            "live": self.live,
            "shared": self.shared,
            "acknowledged": self.acknowledged,
            "removed": self.removed,
            "memories": self.memory_status,
            "counts": dict(self.counts),
        }


# -- readers ---------------------------------------------------------------------------------


class Reader:
    """Searches, recalls and reads the collection, checking each answer against what writers
    write and against what it saw before."""

    def __init__(self, name: str, docs: Collection, store: Store, memories: Memories) -> None:
        self.name, self.docs, self.store, self.memories = name, docs, store, memories
        self.embedder = Embedder.fake(EMBEDDER_DIMS)
        self.rng = random.Random(name)
        self.floor: dict[tuple[str, str], int] = {}  # (id, writer) -> the newest version seen
        self.seen: set[tuple[str, str, int]] = set()  # (id, writer, version)
        self.gone: set[str] = set()  # ids seen removed: never to come back
        self.newest: dict[str, int] = {}  # writer -> the n of its newest document seen
        self.memory_floor: dict[str, str] = {}  # memory id -> the status seen last
        self.memory_totals = (0, 0)  # (memories, archived) at the last sweep
        self.counts: Counter[str] = Counter()
        self.kinds: list[tuple[str, Callable[[], None]]] = [
            ("keyword searches", self._keyword),
            ("vector searches", self._vector),
            ("filtered hybrid searches", self._hybrid),
            ("document reads", self._read_document),
            ("memory recalls", self._recall),
        ]

    def round(self, number: int) -> None:
        """Read once: one kind of read in turn, and every tenth round a sweep of everything."""
        self.docs.reload()
        kind, read = self.kinds[number % len(self.kinds)]
        read()
        self.counts[kind] += 1
        if number % 10 == 0:
            self._sweep()
            self.counts["sweeps"] += 1

    # -- what every read checks --------------------------------------------------------

    def _saw(self, doc_id: str, writer: str, version: int, where: str) -> None:
        expect(doc_id not in self.gone, f"{where}: {doc_id} came back after it was removed")
        floor = self.floor.get((doc_id, writer), 0)
        expect(
            version >= floor,
            f"{where}: {writer}'s {doc_id} went back from version {floor} to {version}",
        )
        self.floor[doc_id, writer] = version
        self.seen.add((doc_id, writer, version))
        owner, n = parse_document_id(doc_id)
        if owner == writer:
            self.newest[owner] = max(self.newest.get(owner, -1), n)

    def _check_hit(self, hit: Hit, where: str) -> None:
        writer, version = version_of(hit.metadata, hit.id)
        expected = document_text(hit.id, writer, version)
        expect(
            hit.chunk_text == expected[hit.char_start : hit.char_end],
            f"{where}: a chunk of {hit.id} is not of {writer}'s version {version}, its"
            f" metadata's: {hit.chunk_text!r}",
        )
        expect(hit.content_hash == sha256(hit.chunk_text or ""), f"{where}: {hit.id} chunk hash")
        self._saw(hit.id, writer, version, where)
        if hit.text != hit.chunk_text:  # the whole text, read after the chunk: same or newer
            head = _TEXT_HEAD.match(hit.text)
            expect(head is not None and head[1] == hit.id, f"{where}: {hit.id} text {hit.text!r}")
            assert head is not None
            whole_writer, whole = head[3], int(head[2])
            expect(
                hit.text == document_text(hit.id, whole_writer, whole),
                f"{where}: {hit.id} has text {hit.text!r}",
            )
            self._saw(hit.id, whole_writer, whole, where)

    def _check_hits(self, hits: list[Hit], k: int, where: str) -> None:
        ids = [h.id for h in hits]
        expect(len(ids) == len(set(ids)) and len(ids) <= k, f"{where}: hits {ids}")
        for hit in hits:
            self._check_hit(hit, where)

    # -- the kinds of reads ------------------------------------------------------------

    def _keyword(self) -> None:
        query = f"shared topics {self.rng.choice(TOPICS)}"
        self._check_hits(self.docs.search(query, k=10, mode="keyword"), 10, "keyword")

    def _vector(self) -> None:
        query = f"{QUERY}, the {self.rng.choice(TOPICS)}"
        self._check_hits(self.docs.search(query, k=10, mode="vector"), 10, "vector")

    def _hybrid(self) -> None:
        writer = self.rng.choice(("w1", "w2"))
        below = self.rng.randint(1, self.newest.get(writer, 0) + 2)
        where = {"writer": writer, "n": {"$lt": below}}
        hits = self.docs.search(QUERY, k=5, where=where, mode="hybrid")
        self._check_hits(hits, 5, "hybrid")
        outside = [h.id for h in hits if h.metadata["writer"] != writer or h.metadata["n"] >= below]
        expect(not outside, f"hybrid: {outside} do not pass {where}")

    def _read_document(self) -> None:
        """Read one document seen before in a snapshot: row, text, chunks and vectors agree."""
        known = sorted({doc_id for doc_id, _ in self.floor} - self.gone)
        if not known:
            return
        doc_id = self.rng.choice(known)
        store = self.store
        with store.snapshot():
            state = store.documents.state(doc_id)
            if state is None:  # seen before and gone now: removed (ids are never re-added)
                expect(not doc_id.startswith("s-"), f"shared {doc_id} is gone")
                self.gone.add(doc_id)
                return
            document = store.documents.get(state.document_id)
            chunks = store.documents.chunks_of(state.document_id)
            text = store.documents.texts([state.document_id]).get(state.document_id)
            vectors = store.vectors.of([c.chunk_id for c in chunks])
        where = f"reading {doc_id}"
        expect(document is not None and document.path == doc_id, f"{where}: row {document}")
        assert document is not None
        writer, version = version_of(document.frontmatter, doc_id)
        expected = document_text(doc_id, writer, version)
        version_named = f"{writer}'s version {version}"
        expect(text == expected, f"{where}: a text of another version than {version_named}")
        expect(
            state.content_hash == document.content_hash == sha256(expected),
            f"{where}: the content hash of another version than {version_named}",
        )
        expect(
            [c.position for c in chunks] == list(range(document.chunk_count))
            and chunks[0].char_start == 0
            and chunks[-1].char_end == len(expected),
            f"{where}: chunks {[(c.position, c.char_start, c.char_end) for c in chunks]}",
        )
        for chunk in chunks:
            expect(
                chunk.text == expected[chunk.char_start : chunk.char_end]
                and chunk.metadata == document.frontmatter,
                f"{where}: chunk {chunk.position} is not of {version_named}: {chunk.text!r}",
            )
        expect(set(vectors) == {c.chunk_id for c in chunks}, f"{where}: chunks without vectors")
        wanted = self.embedder.embed_documents([c.text for c in chunks])
        for chunk, vector in zip(chunks, wanted, strict=True):
            stored = np.frombuffer(vectors[chunk.chunk_id], dtype="<f4")
            expect(np.allclose(stored, vector, atol=1e-6), f"{where}: another chunk's vector")
        self._saw(doc_id, writer, version, where)

    def _recall(self) -> None:
        hits = self.memories.recall("memory about shared topics", k=5, status="any")
        for hit in hits:
            self._check_memory(hit.memory, "recall")

    def _check_memory(self, memory: Memory, where: str) -> None:
        match = _MEMORY_TITLE.match(memory.title)
        expect(match is not None, f"{where}: memory {memory.id} titled {memory.title!r}")
        assert match is not None
        writer, m = match[1], int(match[2])
        expect(
            (memory.title, memory.content) == memory_texts(writer, m)
            and memory.tags == (writer,)
            and memory.status in ("active", "archived"),
            f"{where}: memory {memory.id} is {memory}",
        )
        before = self.memory_floor.get(memory.id)
        expect(
            not (before == "archived" and memory.status == "active"),
            f"{where}: memory {memory.id} went back from archived to active",
        )
        self.memory_floor[memory.id] = memory.status

    def _sweep(self) -> None:
        """Read every document and the counts in one snapshot; check them, and that nothing
        went back since the last sweep."""
        store = self.store
        with store.snapshot():
            count = store.documents.count()
            documents = store.documents.after_path("", count + 1)
            chunk_count = store.documents.chunk_count()
            vector_count = store.vectors.count()
            memory_counts = store.memories.counts()
            newest_memories = self.memories.list(status="any", limit=20)
        where = "sweep"
        expect(len(documents) == count, f"{where}: count {count}, listed {len(documents)}")
        expect(
            chunk_count == vector_count == sum(d.chunk_count for d in documents),
            f"{where}: {chunk_count} chunks, {vector_count} vectors,"
            f" {sum(d.chunk_count for d in documents)} chunks by document",
        )
        newest_before = dict(self.newest)
        present: dict[str, set[int]] = {}
        for document in documents:
            owner, n = parse_document_id(document.path)
            writer, version = version_of(document.frontmatter, document.path)
            expect(
                document.content_hash == sha256(document_text(document.path, writer, version)),
                f"{where}: {document.path}'s content hash is of no version: {document}",
            )
            self._saw(document.path, writer, version, where)
            present.setdefault(owner, set()).add(n)
        shared_seen = {doc_id for doc_id, _ in self.floor if doc_id.startswith("s-")}
        missing = sorted(shared_seen - {document_id("s", n) for n in present.get("s", ())})
        expect(not missing, f"{where}: shared {missing} seen before, gone now")
        for writer, newest in newest_before.items():
            now = max(present.get(writer, {-1}))
            expect(now >= newest, f"{where}: {writer}'s newest went back from {newest} to {now}")
        for owner, numbers in present.items():
            if owner != "s":  # a writer adds its own in order of n: one absent below is removed
                self.gone.update(
                    document_id(owner, n) for n in range(max(numbers)) if n not in numbers
                )
        archived = memory_counts.by_status.get("archived", 0)
        expect(
            memory_counts.total >= self.memory_totals[0] and archived >= self.memory_totals[1],
            f"{where}: memories went from {self.memory_totals} to {memory_counts}",
        )
        expect(
            memory_counts.embedded == memory_counts.total,
            f"{where}: {memory_counts.total} memories, {memory_counts.embedded} with a vector",
        )
        self.memory_totals = (memory_counts.total, archived)
        for memory in newest_memories:
            self._check_memory(memory, where)

    def report(self) -> dict[str, Any]:
        """Return what this reader saw: ``seen`` ([id, writer, version]), ``memories`` (ids),
        ``counts`` (of each kind of read), and how many versions after the first
        (``replaced_seen``) and removed documents (``removed_seen``) it came across."""
        return {
            "seen": sorted(self.seen),
            "memories": sorted(self.memory_floor),
            "counts": dict(self.counts),
            "replaced_seen": sum(1 for _, _, version in self.seen if version > 0),
            "removed_seen": len(self.gone),
        }


# -- the process -----------------------------------------------------------------------------


def wait_for(folder: Path, processes: int) -> bool:
    """Wait until ``processes`` files are in ``folder``; False if they did not come in time."""
    deadline = time.monotonic() + BARRIER_SECONDS
    while len(list(folder.iterdir())) < processes:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def main() -> None:
    role, name, storage, collection, seconds, barrier, processes, out = sys.argv[1:9]
    ready, done = Path(barrier) / "ready", Path(barrier) / "done"
    try:
        docs, store, memories = open_all(storage, collection)
    except BaseException:  # the others need not wait for this one: its traceback is the report
        (ready / name).touch()
        (done / name).touch()
        raise
    worker = (
        Writer(name, docs, memories) if role == "writer" else Reader(name, docs, store, memories)
    )
    errors: list[str] = []
    error_count = 0
    (ready / name).touch()
    if not wait_for(ready, int(processes)):
        errors.append("gave up waiting for the others to open the collection")
    started = time.monotonic()
    rounds = 0
    try:
        while time.monotonic() - started < float(seconds) or rounds < MIN_ROUNDS:
            try:
                worker.round(rounds)
            except (VromError, Inconsistent) as exc:
                error_count += 1
                if len(errors) < MAX_ERRORS_KEPT:
                    errors.append(f"round {rounds}: {type(exc).__name__}: {exc}")
            rounds += 1
    finally:  # a crash (a bug: its traceback is the report) still lets the others finish
        (done / name).touch()
    seconds_run = time.monotonic() - started
    if not wait_for(done, int(processes)):
        errors.append("gave up waiting for the others to finish")
    result = {
        "role": role,
        "rounds": rounds,
        "seconds": round(seconds_run, 1),
        "count": docs.reload(),
        "errors": errors,
        "error_count": error_count,
        **worker.report(),
    }
    Path(out).write_text(json.dumps(result))
    docs.close()
    store.close()


if __name__ == "__main__":
    main()
