"""The exact index's vectors in one file beside the store, read memory-mapped.

The file is a cache of what the store holds, never the truth (like the HNSW graph): it names
the store and the vector change it reflects, and `vrom.index.exact.ExactIndex` replays the
store's changes since, or rebuilds it from the store.

Layout, little-endian: `MAGIC` (8 bytes); the header's length (uint32); the header, JSON
padded with spaces so that the data starts at a multiple of `ALIGNMENT` bytes; the data: the
keys (int64, ascending), the vectors (float32, a row each), then zero bytes up to a multiple of
8. The header holds the `FORMAT_VERSION`, the store's identity, the change number, the
encoding the vectors were decoded from, their count and dimensions, and a checksum: the sum of
the data's 64-bit words, wrapping around. `read_matrix` checks every part, so a truncated,
overwritten or foreign file is refused, never searched. Summing costs about 5 ms at 100k
vectors of 384 dimensions (a memory-speed pass over 154 MB, which also brings the pages in for
the first search); a CRC-32 of the same bytes took 40 ms.

The vectors stay float32. Float16 would halve the file, and it kept recall@10 at 0.9996 against
float32 (19,594 real all-MiniLM-L6-v2 chunk vectors of SciFact and NFCorpus, 807 SciFact
queries; 3 of them lost one hit), but numpy has no half-precision BLAS: scoring 100k float16
vectors took 70-190 ms a query (converted in blocks or at once) where float32 took 12-15 ms.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from vrom.index.cache_files import temporary
from vrom.store import Sidecar, VectorSource

MAGIC = b"VROMMAT\x00"
FORMAT_VERSION = 1
ALIGNMENT = 64
"""The data starts at a multiple of this many bytes: whole cache lines, for numpy and BLAS."""
_LENGTH = struct.Struct("<I")
_PREAMBLE = len(MAGIC) + _LENGTH.size
_LARGEST_HEADER = 1 << 16
_WORDS = 1 << 64
_WIDEST = _WORDS - 1


@dataclass(frozen=True)
class MatrixHeader:
    """What a matrix file says of its vectors besides their shape: the store's identity, the
    vector change number they reflect, and how the store encoded them before they were decoded
    to float32."""

    store: str
    changes: int
    encoding: str


@dataclass(frozen=True)
class StoredMatrix:
    """Vectors by key as a matrix file holds them: ``ids`` ascending, ``matrix`` a row each
    (read-only views of the mapped file)."""

    header: MatrixHeader
    ids: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]


def read_matrix(path: Path) -> StoredMatrix | None:
    """Return the matrix cached at ``path``, memory-mapped, or None when there is none, it
    cannot be read, or any part of it fails its check."""
    try:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size < _PREAMBLE:
                return None
            # the file opened, not the path: another process may rename a new one over it
            mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    # No close: the arrays returned view the mapping and keep it open while they are used.
    return _parse(mapping)


def current_count(vectors: VectorSource, cache: Sidecar | None) -> int | None:
    """Return how many vectors the matrix file holds if it reflects the store's latest vector
    change, else None; only its header is read (the data is checked when it is opened)."""
    if cache is None:
        return None
    try:
        with open(cache.path, "rb") as file:
            found = _header(file.read(_PREAMBLE + _LARGEST_HEADER))
    except OSError:
        return None
    if found is None:
        return None
    header = found[0]
    if header["store"] != vectors.identity() or header["encoding"] != vectors.encoding():
        return None
    count: int = header["count"]
    return count if header["changes"] == vectors.change_number() else None


def _header(data: bytes | mmap.mmap) -> tuple[dict[str, Any], int] | None:
    """Return the header at the start of ``data`` and where the data after it starts."""
    if len(data) < _PREAMBLE or data[: len(MAGIC)] != MAGIC:
        return None
    (length,) = _LENGTH.unpack_from(data, len(MAGIC))
    start = _PREAMBLE + length
    if length > _LARGEST_HEADER or start % ALIGNMENT or start > len(data):
        return None
    try:
        header = json.loads(data[_PREAMBLE:start])
    except ValueError:  # not JSON, or not UTF-8
        return None
    if not isinstance(header, dict) or not _header_is_sound(header):
        return None
    return header, start


def _parse(mapping: mmap.mmap) -> StoredMatrix | None:
    found = _header(mapping)
    if found is None:
        return None
    header, start = found
    count, dims = header["count"], header["dims"]
    if len(mapping) != start + _padded(count * 8 + count * dims * 4):
        return None
    words = np.frombuffer(mapping, dtype="<u8", count=(len(mapping) - start) // 8, offset=start)
    if int(np.add.reduce(words, dtype=np.uint64)) != header["checksum"]:
        return None
    ids = np.frombuffer(mapping, dtype="<i8", count=count, offset=start)
    if not bool(np.all(ids[1:] > ids[:-1])):
        return None
    matrix = np.frombuffer(mapping, dtype="<f4", count=count * dims, offset=start + 8 * count)
    return StoredMatrix(
        MatrixHeader(header["store"], header["changes"], header["encoding"]),
        ids.astype(np.int64, copy=False),
        matrix.astype(np.float32, copy=False).reshape(count, dims),
    )


def _header_is_sound(header: dict[str, Any]) -> bool:
    def whole(key: str, least: int) -> bool:
        value = header.get(key)
        return type(value) is int and value >= least

    return (
        header.get("format") == FORMAT_VERSION
        and isinstance(header.get("store"), str)
        and isinstance(header.get("encoding"), str)
        and whole("changes", 0)
        and whole("count", 1)
        and whole("dims", 1)
        and whole("checksum", 0)
        and header["checksum"] < _WORDS
    )


def write_matrix(
    cache: Sidecar,
    header: MatrixHeader,
    ids: npt.NDArray[np.int64],
    blocks: Iterable[npt.NDArray[np.float32]],
) -> None:
    """Write a matrix file to ``cache.path``, through a temporary file renamed over it: the rows
    of ``ids`` come in ``blocks`` of rows, in order, so no second copy of the matrix is made.

    Raises `OSError` when it cannot be written. No fsync: a file torn by a crash fails
    `read_matrix`'s checks and is rebuilt, like any other damaged cache.
    """
    ids = np.ascontiguousarray(ids, dtype="<i8")
    fields: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "store": header.store,
        "changes": header.changes,
        "encoding": header.encoding,
        "count": len(ids),
        "dims": _WIDEST,  # these two as wide as any: the room kept fits the header written last
        "checksum": _WIDEST,
    }
    room = len(_header_text(fields))
    checksum = _Checksum()
    checksum.add(ids)
    rows = dims = 0
    temporaries: list[str] = []
    try:
        name = temporary(cache.path, temporaries, cache)
        with open(name, "wb") as file:
            file.write(b"\0" * room)
            ids.tofile(file)
            for block in blocks:
                data = np.ascontiguousarray(block, dtype="<f4")
                data.tofile(file)
                checksum.add(data)
                rows, dims = rows + len(data), data.shape[1]
            file.write(b"\0" * (-file.tell() % 8))
            if rows != len(ids) or not dims:
                raise ValueError(f"{rows} rows written for {len(ids)} ids")
            fields.update(dims=dims, checksum=checksum.value())
            file.seek(0)
            file.write(_header_text(fields, room))
        os.replace(name, cache.path)
    finally:
        for leftover in temporaries:
            Path(leftover).unlink(missing_ok=True)


def _header_text(fields: dict[str, Any], room: int | None = None) -> bytes:
    """Return the magic, length and JSON header, padded with spaces to ``room`` bytes, or to
    where the data may start (a multiple of `ALIGNMENT`)."""
    text = json.dumps(fields).encode("utf-8")
    size = _PREAMBLE + len(text)
    size = room if room is not None else size + (-size % ALIGNMENT)
    if size < _PREAMBLE + len(text):
        raise ValueError(f"a matrix file header of {len(text)} bytes does not fit in {size}")
    text += b" " * (size - _PREAMBLE - len(text))
    return MAGIC + _LENGTH.pack(len(text)) + text


class _Checksum:
    """The wrapping sum of the 64-bit little-endian words of the data, fed in pieces (a piece
    may end in the middle of a word: float32 rows of an odd dimension)."""

    def __init__(self) -> None:
        self._total = 0
        self._low: int | None = None  # the first half of a word a piece ended in

    def add(self, data: npt.NDArray[Any]) -> None:
        halves = data.reshape(-1).view("<u4")
        if self._low is not None and len(halves):
            self._total += self._low + (int(halves[0]) << 32)
            self._low, halves = None, halves[1:]
        even = len(halves) - len(halves) % 2
        self._total += int(np.add.reduce(halves[:even].view("<u8"), dtype=np.uint64))
        if even < len(halves):
            self._low = int(halves[-1])

    def value(self) -> int:
        """Return the sum, the last half word (and the zero bytes after it) included."""
        return (self._total + (self._low or 0)) % _WORDS


def _padded(size: int) -> int:
    return size + (-size % 8)
