"""opencode's instructions for the vault: a section in ``AGENTS.md`` and a ``vrom`` skill.

They tell the agent which tool to use when, and go where opencode reads them for a given config:
beside a global config (``~/.config/opencode/AGENTS.md``,
``~/.config/opencode/skills/vrom/SKILL.md``) or in the project of a project config
(``AGENTS.md``, ``.opencode/skills/vrom/SKILL.md``). Not in the vault: vrom only reads the
vault, and an ``AGENTS.md`` there would be indexed as a note. ``AGENTS.md`` is changed only
between vrom's markers (``<!-- vrom:start -->`` … ``<!-- vrom:end -->``, replaced on each run)
and the skill file is vrom's own.
"""

from __future__ import annotations

from pathlib import Path

from vrom.errors import ValidationError
from vrom.install.client_configs import DEFAULT_NAME, opencode_dir

_AGENTS_SECTION = """\
<!-- {name}:start -->
## Notes vault (vrom)

The `{name}` MCP server serves the user's Markdown notes vault:
`{vault}`.
Before answering about the user's projects, decisions or notes from memory, search them with
`vault_search` (or `vault_context` for ready-to-quote passages with sources) and cite the note
path and heading.
Read a whole note with `vault_read`. Change notes only when asked: `vault_write`
(create / overwrite / append), `vault_delete` (moves to `.trash/`). Keep lasting facts with
`vault_remember` and look them up with `vault_recall`. The `{name}` skill has the full guide.
<!-- {name}:end -->
"""

_SKILL = """\
---
name: {name}
description: Search, read and write the user's Markdown notes vault ({vault}) and keep memories across sessions with the {name} MCP tools. Use when the user's notes may answer a question, when asked to find, cite, create or update a note, or to remember or recall something.
---

# The notes vault at {vault}

The `{name}` MCP server serves this vault; opencode names its tools `{name}_<tool>`
(`{name}_vault_search`, ...). Notes are Markdown with YAML frontmatter, `[[wikilinks]]` and
`#tags`; paths are relative to the vault root (`Projects/Atlas.md`).

## Find
- `vault_search`: find notes by meaning and keywords. `query` takes words, a question,
  `"an exact phrase"`, `-excluded`, `prefix*`; `path` (a folder) and `tags` (all required)
  narrow it, and `where` filters on frontmatter (`{{"status": "done", "year": {{"$gte":
  2024}}}}`; operators `$ne $gt $gte $lt $lte $in $nin $contains $and $or`); `mode` is hybrid
  (default), keyword, vector or rerank. It returns `k` notes, each with its best chunk (`chunks: true` for the best chunks).
  Every hit carries its note path, heading, chunk id and content hash: cite `path › heading`
  in answers. Use it first, before saying the notes do not cover something.
  A hit marked `stale` is past its note's `stale_after`: say so when you rely on it. A hit with
  `fresh: false` comes from a note changed on disk since it was indexed: `vault_read` it (or
  `vault_reindex`) before quoting.
- `vault_context`: ready-to-quote passages for a question within `max_tokens`, each followed by
  its source. Use it to ground an answer in several notes at once.

## Read and browse
- `vault_read`: one note whole (frontmatter, body, headings, tags, links). Read before editing.
- `vault_list`: a folder's notes and subfolders. `vault_tags`: all tags with counts, or the notes
  with one tag (nested tags included).
- `vault_wikilinks` (links a note makes), `vault_backlinks` (notes linking to it),
  `vault_related` (links, backlinks, shared tags and notes similar in meaning).
- `vault_stats`: counts, the index's location and model.
- `vault_format`: each note's format and what breaks OKF v0.2 (`action` check), or the
  frontmatter it lacks (`action` enrich; `apply` writes it: only when asked).

## Write (these change the user's files: only when asked)
- `vault_write`: `mode` create (fails if the note exists), append, or overwrite; `frontmatter`
  keys are merged into the note's. Prefer append to overwrite; keep the note's style.
- `vault_frontmatter`: read or merge frontmatter keys; the body is left alone.
- `vault_delete`: moves the note to the vault's `.trash/`; `permanent` only when the user says so.
- `vault_reindex`: after notes were edited outside these tools (writes through them are indexed
  at once).

## Memory (the agent's own, kept across sessions)
- `vault_remember`: a fact, preference or decision worth keeping, in one self-contained line.
- `vault_recall`: look memories up by meaning before asking the user again.
- `vault_memory_archive`: retire a memory that is wrong or outdated. `vault_memory_stats`: counts.
"""


def agents_text(old: str | None, name: str, vault: Path) -> str:
    """Return ``AGENTS.md`` (``old``, or empty) with the section for server ``name`` in place."""
    section = _AGENTS_SECTION.format(name=name, vault=vault)
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    old = old or ""
    if old.count(start) > 1:
        raise ValidationError(f"AGENTS.md has {start} more than once: keep one section")
    begin = old.find(start)
    if begin < 0:
        if not old or old.endswith("\n\n"):
            return old + section
        return old + ("\n" if old.endswith("\n") else "\n\n") + section
    finish = old.find(end, begin)
    if finish < 0:
        raise ValidationError(f"AGENTS.md has {start} but no {end}: fix it by hand")
    after = old[finish + len(end) :]
    return old[:begin] + section + after.removeprefix("\n")


def opencode_instruction_paths(config: Path, name: str = DEFAULT_NAME) -> tuple[Path, Path]:
    """Return where the ``AGENTS.md`` section and the skill go for an opencode config file."""
    folder = config.absolute().parent
    if folder == opencode_dir().absolute():
        return folder / "AGENTS.md", folder / "skills" / name / "SKILL.md"
    if folder.name == ".opencode":
        return folder.parent / "AGENTS.md", folder / "skills" / name / "SKILL.md"
    return folder / "AGENTS.md", folder / ".opencode" / "skills" / name / "SKILL.md"


def skill_text(name: str, vault: Path) -> str:
    """Return the ``SKILL.md`` of server ``name`` serving the vault at ``vault``."""
    return _SKILL.format(name=name, vault=vault)
