"""Where an export is written: a DuckDB file, or a folder of Parquet files and a manifest.

Either way the tables live in a DuckDB database while they are written: the file itself, or
an in-memory database loaded from the folder's Parquet files and written back to them. A
target opens what ``OUT`` already holds, says whether it is a vrom export (its manifest) and
whether its tables can be brought up to date, and refuses anything else: an export never
overwrites a file or folder that is not one.

DuckDB runs only its own SQL on its own databases here; rows come in as newline-delimited JSON
(`load`), which every DuckDB since 1.1 reads without pandas or pyarrow.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from vrom.errors import StorageError, ValidationError
from vrom.export.tables import COLUMNS, TABLES

FORMATS = ("parquet", "duckdb")
MANIFEST_FORMAT = "vrom-export"
FORMAT_VERSION = 1
"""The layout of the tables; an export of another version is written again in full."""
MANIFEST_FILE = "manifest.json"
MANIFEST_TABLE = "manifest"
MAX_ROW_BYTES = 1 << 30
"""The largest row DuckDB is told to expect (a note may hold megabytes of frontmatter)."""


def import_duckdb() -> ModuleType:
    """Return the duckdb module, or raise `StorageError` naming the extra that installs it."""
    try:
        import duckdb
    except ImportError as exc:
        raise StorageError(
            "exporting for analytics needs DuckDB: pip install 'vrom[analytics]'"
        ) from exc
    return duckdb


def quoted(text: str) -> str:
    """Return ``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


class Target:
    """An export's database while it is written, and what ``OUT`` held before.

    ``manifest`` is the manifest of the export ``OUT`` holds (None: none yet); ``problem`` says
    why its tables cannot be brought up to date although it is an export (None: they can).
    """

    def __init__(self, duckdb: ModuleType, out: Path) -> None:
        self.duckdb = duckdb
        self.out = out
        self.manifest: dict[str, Any] | None = None
        self.problem: str | None = None
        self.con: Any = None
        self._scratch = tempfile.TemporaryDirectory(prefix="vrom-export-")
        self._loads = 0

    # -- writing -----------------------------------------------------------------------------

    def start(self, incremental: bool, tables: Iterable[str]) -> None:
        """Begin writing: keep the tables to bring up to date, or start from empty ones."""
        raise NotImplementedError

    def finish(self, manifest: Mapping[str, Any]) -> None:
        """Save the tables with ``manifest``, so they are read back as one export."""
        raise NotImplementedError

    def abort(self) -> None:
        """Leave ``OUT`` as it was before `start`, as far as the format allows."""

    def close(self) -> None:
        """Close the database and remove the scratch files."""
        if self.con is not None:
            self.con.close()
            self.con = None
        self._scratch.cleanup()

    def create(self, tables: Iterable[str], *, replace: bool) -> None:
        """Create the export's tables (dropping them first with ``replace``)."""
        for table in tables:
            if replace:
                self.con.execute(f"DROP TABLE IF EXISTS {table}")
            columns = ", ".join(f"{name} {kind}" for name, kind in COLUMNS[table])
            self.con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({columns})")

    def load(self, table: str, lines: Iterable[str]) -> int:
        """Append rows given as lines of JSON (`vrom.export.tables.json_lines`); return how
        many. ``JSON`` columns arrive as text holding JSON and are cast on the way in."""
        self._loads += 1
        path = Path(self._scratch.name) / f"{self._loads}-{table}.jsonl"
        count = 0
        with open(path, "w", encoding="utf-8") as file:
            for line in lines:
                file.write(line)
                file.write("\n")
                count += 1
        if count:
            names = ", ".join(name for name, _ in COLUMNS[table])
            reading = ", ".join(
                f"{quoted(name)}: {quoted('VARCHAR' if kind == 'JSON' else kind)}"
                for name, kind in COLUMNS[table]
            )
            self.con.execute(
                f"INSERT INTO {table} ({names}) SELECT {names} FROM read_json("
                f"{quoted(str(path))}, format = 'newline_delimited', columns = {{{reading}}},"
                f" maximum_object_size = {MAX_ROW_BYTES})"
            )
        path.unlink()
        return count

    def count(self, table: str) -> int:
        """Return how many rows ``table`` holds."""
        return int(self.con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


class DuckDBFile(Target):
    """An export in one DuckDB file, brought up to date in one transaction."""

    def __init__(self, duckdb: ModuleType, out: Path) -> None:
        super().__init__(duckdb, out)
        if out.is_dir():
            raise ValidationError(f"{out} is a folder: a DuckDB export is one file")
        existed = self._existed = out.exists()
        try:
            self.con = duckdb.connect(str(out))
            names = {
                row[0]
                for row in self.con.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
                ).fetchall()
            }
            if MANIFEST_TABLE in names:
                rows = self.con.execute(f"SELECT key, value FROM {MANIFEST_TABLE}").fetchall()
                self.manifest = {key: json.loads(value) for key, value in rows}
        except (duckdb.Error, ValueError) as exc:
            self.close()
            what = "is not a DuckDB database" if existed else "cannot be created"
            raise StorageError(f"{out} {what}: {_first_line(exc)}") from exc
        if names and (self.manifest or {}).get("format") != MANIFEST_FORMAT:
            self.close()
            raise ValidationError(
                f"{out} is a DuckDB database that holds no vrom export: choose another file"
            )

    def start(self, incremental: bool, tables: Iterable[str]) -> None:
        """Begin the transaction the whole export is written in; drop the tables it leaves
        out (vectors not asked for) and, unless ``incremental``, empty the others."""
        tables = list(tables)
        self.con.execute("BEGIN TRANSACTION")
        for table in TABLES:
            if table not in tables:
                self.con.execute(f"DROP TABLE IF EXISTS {table}")
        self.create(tables, replace=not incremental)

    def finish(self, manifest: Mapping[str, Any]) -> None:
        """Write the manifest table and commit."""
        self.con.execute(f"CREATE OR REPLACE TABLE {MANIFEST_TABLE} (key VARCHAR, value JSON)")
        for key, value in manifest.items():
            self.con.execute(
                f"INSERT INTO {MANIFEST_TABLE} VALUES (?, ?)", [key, json.dumps(value)]
            )
        self.con.execute("COMMIT")
        self.con.execute("CHECKPOINT")

    def abort(self) -> None:
        """Roll the transaction back: the file keeps the export it held, and a file this
        export created is removed."""
        with contextlib.suppress(self.duckdb.Error):
            self.con.execute("ROLLBACK")
        if not self._existed:
            self.close()
            for path in (self.out, self.out.with_name(self.out.name + ".wal")):
                path.unlink(missing_ok=True)


class ParquetFolder(Target):
    """An export as a folder: one Parquet file per table and ``manifest.json``.

    Its tables are loaded into an in-memory DuckDB database to be brought up to date, then
    each file is written beside its old self and renamed over it, the manifest last. The
    manifest holds each file's SHA-256: a folder whose files no longer match it (a run killed
    between renames, a file edited) is written again in full.
    """

    def __init__(self, duckdb: ModuleType, out: Path) -> None:
        super().__init__(duckdb, out)
        if out.exists() and not out.is_dir():
            raise ValidationError(f"{out} is a file: a Parquet export is a folder")
        manifest_path = out / MANIFEST_FILE
        if manifest_path.is_file():
            try:
                manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise StorageError(f"cannot read {manifest_path}: {exc}") from exc
            if isinstance(manifest, dict) and manifest.get("format") == MANIFEST_FORMAT:
                self.manifest = manifest
                self.problem = self._changed_files(manifest)
        if self.manifest is None and out.is_dir() and any(out.iterdir()):
            raise ValidationError(
                f"{out} is a folder that holds no vrom export: choose an empty or new folder"
            )
        self.con = duckdb.connect()

    def _changed_files(self, manifest: Mapping[str, Any]) -> str | None:
        """Return which file differs from what the manifest says, or None when none does."""
        files = manifest.get("files")
        if not isinstance(files, dict):
            return "its manifest lists no files"
        for table, entry in files.items():
            path = self.out / str(entry.get("file"))
            try:
                digest = _sha256(path)
            except OSError:
                return f"{path.name} is missing"
            if digest != entry.get("sha256") or table not in TABLES:
                return f"{path.name} changed since it was exported"
        return None

    def start(self, incremental: bool, tables: Iterable[str]) -> None:
        """Create the tables, filled from the folder's files when bringing them up to date."""
        tables = list(tables)
        self.create(tables, replace=True)
        if not incremental or self.manifest is None:
            return
        for table, entry in self.manifest["files"].items():
            if table in tables:
                names = ", ".join(name for name, _ in TABLES[table])
                path = quoted(str(self.out / entry["file"]))
                self.con.execute(
                    f"INSERT INTO {table} ({names}) SELECT {names} FROM read_parquet({path})"
                )

    def finish(self, manifest: Mapping[str, Any]) -> None:
        """Write each table's file beside the old one and rename it over, then the manifest."""
        self.out.mkdir(parents=True, exist_ok=True)
        written = {}
        tables = [t for t in TABLES if t in manifest["tables"]]
        for table in tables:
            name = f"{table}.parquet"
            temporary = self.out / f".{name}.tmp"
            self.con.execute(
                f"COPY {table} TO {quoted(str(temporary))} (FORMAT parquet, COMPRESSION zstd)"
            )
            written[table] = {"file": name, "sha256": _sha256(temporary)}
            os.replace(temporary, self.out / name)
        for table in TABLES:
            if table not in written:
                (self.out / f"{table}.parquet").unlink(missing_ok=True)
        text = json.dumps({**manifest, "files": written}, indent=1, ensure_ascii=False)
        temporary = self.out / f".{MANIFEST_FILE}.tmp"
        temporary.write_text(text + "\n", encoding="utf-8")
        os.replace(temporary, self.out / MANIFEST_FILE)

    def abort(self) -> None:
        """Remove the temporary files of a write that failed (the old files are untouched
        until renamed over, and a folder with some renamed is written again in full)."""
        if self.out.is_dir():
            for leftover in self.out.glob(".*.tmp"):
                leftover.unlink(missing_ok=True)


def open_target(duckdb: ModuleType, out: Path, format: str) -> Target:
    """Return the target an export in ``format`` writes to at ``out``."""
    return DuckDBFile(duckdb, out) if format == "duckdb" else ParquetFolder(duckdb, out)


def export_format(out: Path, format: str | None) -> str:
    """Return the format to write: ``format`` if given, else ``duckdb`` for a path ending in
    ``.duckdb`` or ``.db`` and ``parquet`` (a folder) for any other."""
    if format is None:
        return "duckdb" if out.suffix.lower() in (".duckdb", ".db") else "parquet"
    if format not in FORMATS:
        raise ValidationError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    return format


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
