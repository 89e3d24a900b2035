"""Read a note's YAML frontmatter into a mapping that JSON holds and gives back unchanged.

Reading never raises on text: broken frontmatter becomes a warning and the note is kept as plain
text. YAML is read with PyYAML's safe loader in two steps: the text is composed into a graph of
nodes (linear in its length), and the graph is measured before any value is built. Aliases let a
few hundred bytes name millions of values (seven levels of nine ``*aliases`` expand to 4.8
million), so frontmatter whose aliases and merge keys add more than `MAX_ALIAS_VALUES` values to
those written, that nests deeper than `MAX_DEPTH` levels, or that contains itself, is refused the
same way as broken YAML.

Each value then becomes one JSON can hold (`json_ready`):

- strings, booleans, null, finite floats, and integers within 64 bits: as they are;
- ``.inf``, ``-.inf`` and ``.nan``: the strings ``"inf"``, ``"-inf"`` and ``"nan"`` (JSON has
  no such numbers);
- integers beyond 64 bits: their decimal string (SQLite and most JSON readers would round them);
- dates, times and datetimes: ISO 8601 strings;
- ``!!binary``: its base64 text; ``!!set``: a sorted list; ``!!omap`` and ``!!pairs``: lists of
  ``[key, value]`` pairs;
- mapping keys: strings; a key that is not one is written as its JSON text (``true``, ``1``,
  ``null``, ``inf``), a date as ISO 8601;
- a NUL character or a lone surrogate (what an escape such as ``"\\0"`` or ``"\\udce9"``
  makes, and no store holds, `vrom.store.storable`): U+FFFD, so the note is kept.

Non-finite numbers and integers beyond 64 bits change kind (a number becomes a string), so a
note holding one is indexed with a warning naming each such value (`changed_values`).

A value YAML parses but cannot build (``!!timestamp not-a-date``, a 30th of February, an integer
of over 4,300 digits, a tag it does not know) is kept as its text, field by field: the rest of the
frontmatter is built as usual, and a warning names each field kept so (`LoadedYaml.kept_as_text`).
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import math
import re
from typing import Any, NamedTuple

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

try:  # the C loader is several times faster on large vaults
    from yaml import CSafeLoader as _YamlLoader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _YamlLoader  # type: ignore[assignment]

MAX_ALIAS_VALUES = 100_000
"""How many values aliases (and merge keys) may add to those written in the frontmatter."""

MAX_DEPTH = 100
"""How deeply frontmatter may nest (SQLite's JSON functions stop at 1,000 levels)."""

_INT64 = range(-(2**63), 2**63)
_SIZE_CAP = 2**62  # sizes are only compared with the limit; capping keeps the sums small
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_CLOSING = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$", re.MULTILINE)
_YAML_SPELLING = {"inf": ".inf", "-inf": "-.inf", "nan": ".nan"}
_CHANGES_SHOWN = 3
_MAX_INT_DIGITS = 4300  # Python's own limit for turning an integer into its decimal text
_INT_TEXT_LIMIT = 10**_MAX_INT_DIGITS
_MAP, _SEQ, _MERGE = (f"tag:yaml.org,2002:{kind}" for kind in ("map", "seq", "merge"))
# PyYAML's constructors raise whatever their code meets on a value they cannot build:
# ValueError (a 30th of February), AttributeError (!!timestamp on other text), KeyError (!!bool
# on an empty string), IndexError (!!int on one), ConstructorError (an unknown tag)...
_UNBUILDABLE = (Exception,)


class YamlRefusedError(yaml.YAMLError):
    """YAML that parses but would cost too much to build (or never end); the message says why."""


def split_frontmatter(
    text: str, *, note_changes: bool = False
) -> tuple[dict[str, Any], int, list[str]]:
    """Return (frontmatter, body offset, warnings) for a note's text.

    A note without frontmatter has body offset 0. Malformed or refused frontmatter gives a
    warning and an empty mapping, and the whole text is kept as the body so nothing is lost.
    Values YAML cannot build are kept as text with a warning naming them (`load_yaml`); with
    ``note_changes``, values stored as another kind (`changed_values`) give a warning too.
    """
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return {}, 0, []
    first_line_end = text.index("\n") + 1
    closing = _CLOSING.search(text, first_line_end)
    if closing is None:
        return {}, 0, ["frontmatter is not closed with '---': indexed as plain text"]
    raw = text[first_line_end : closing.start()]
    body_start = closing.end()
    if body_start < len(text) and text[body_start] == "\n":
        body_start += 1
    try:
        data, kept = load_yaml(raw)
    except YamlRefusedError as exc:
        return {}, 0, [f"frontmatter refused ({exc}): indexed as plain text"]
    except yaml.MarkedYAMLError as exc:
        line = "" if exc.problem_mark is None else f" at line {exc.problem_mark.line + 2}"
        reason = _one_line(exc.problem or exc.context or "")
        return {}, 0, [f"malformed frontmatter{line} ({reason}): indexed as plain text"]
    except yaml.YAMLError as exc:  # a character YAML refuses: the message names it, then where
        return {}, 0, [f"malformed frontmatter ({_one_line(str(exc))}): indexed as plain text"]
    except (ValueError, TypeError, RecursionError) as exc:
        return {}, 0, [f"malformed frontmatter ({type(exc).__name__}): indexed as plain text"]
    if data is None:
        return {}, body_start, []
    if not isinstance(data, dict):
        return {}, body_start, [f"frontmatter is a {type(data).__name__}, not a mapping: ignored"]
    warnings = [kept_as_text_warning(kept)] if kept else []
    changed = changed_values(data) if note_changes else []
    if changed:
        shown = ", ".join(changed[:_CHANGES_SHOWN])
        more = (
            f" and {len(changed) - _CHANGES_SHOWN:,} more" if len(changed) > _CHANGES_SHOWN else ""
        )
        warnings.append(f"frontmatter values stored as JSON holds them: {shown}{more}")
    return json_ready(data), body_start, warnings


def kept_as_text_warning(kept: list[str]) -> str:
    """Return one line naming the frontmatter values kept as text (`LoadedYaml.kept_as_text`)."""
    shown = ", ".join(kept[:_CHANGES_SHOWN])
    more = f" and {len(kept) - _CHANGES_SHOWN:,} more" if len(kept) > _CHANGES_SHOWN else ""
    return f"frontmatter values YAML cannot build, kept as text: {shown}{more}"


def changed_values(value: Any, where: str = "") -> list[str]:
    """Return, for each value `json_ready` changes in kind or loses part of, where it is and
    what it becomes: ``x (.inf, kept as the string "inf")``."""
    if isinstance(value, dict):
        return [
            change
            for key, item in value.items()
            for change in changed_values(
                item, f"{where}.{_json_key(key)}" if where else _json_key(key)
            )
        ]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [
            change
            for i, item in enumerate(value)
            for change in changed_values(item, f"{where}[{i}]")
        ]
    if isinstance(value, float) and not math.isfinite(value):
        return [f'{where} ({_YAML_SPELLING[str(value)]}, kept as the string "{value}")']
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
        digits = len(str(abs(value)))
        return [f"{where} (a {digits:,}-digit integer, kept as its decimal string)"]
    return []


def _one_line(message: str) -> str:
    """Return the first line of an error message (PyYAML's add where it happened)."""
    return " ".join(message.strip().split("\n", 1)[0].split()) or "invalid YAML"


class LoadedYaml(NamedTuple):
    """A YAML document as Python values, and where a value was kept as its text."""

    value: Any
    kept_as_text: list[str]
    """One entry a value YAML could not build: where it is and why, ``d (not a valid
    !!timestamp)``."""


def load_yaml(raw: str) -> LoadedYaml:
    """Return the YAML document in ``raw`` as Python values (None for an empty document).

    A value YAML cannot build is kept as its text (see this module's docstring). Raises
    `yaml.YAMLError` for text that is not YAML, and `YamlRefusedError` (a `yaml.YAMLError`) for a
    document over the limits in this module's docstring.
    """
    loader = _Loader(raw)
    try:
        node = loader.get_single_node()
        if node is None:
            return LoadedYaml(None, [])
        problem = None if _within_bounds(raw) else _cost_problem(node)
        if problem is not None:
            raise YamlRefusedError(problem)
        try:
            return LoadedYaml(loader.construct_document(node), [])
        except _UNBUILDABLE:
            pass  # built again below, value by value, from a fresh graph (merges edit theirs)
    finally:
        loader.dispose()
    loader = _Loader(raw)
    try:
        kept: list[str] = []
        return LoadedYaml(
            _ValueBuilder(loader, raw, kept).build(loader.get_single_node(), ""), kept
        )
    finally:
        loader.dispose()


def _bounded_int(loader: _YamlLoader, node: ScalarNode) -> int:
    """Build an integer as PyYAML does, refusing one whose decimal text Python would refuse
    to write (``0x`` and 4,000 ``f``: it would fail later, when stored)."""
    too_long = f"an integer of over {_MAX_INT_DIGITS:,} digits"
    try:
        value: int = yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)
    except ValueError:
        if len(str(node.value)) > _MAX_INT_DIGITS:  # Python refused to read it: say so plainly
            raise ValueError(too_long) from None
        raise
    if abs(value) >= _INT_TEXT_LIMIT:
        raise ValueError(too_long)
    return value


class _Loader(_YamlLoader):
    """The safe loader, with integers bounded as Python can write them."""


_Loader.add_constructor("tag:yaml.org,2002:int", _bounded_int)


class _ValueBuilder:
    """Builds a composed document as PyYAML would, one value at a time: a value its
    constructor refuses becomes its text, noted in ``kept`` with where it is and why."""

    def __init__(self, loader: Any, raw: str, kept: list[str]) -> None:
        self._loader = loader
        self._raw = raw
        self._kept = kept
        self._built: dict[int, Any] = {}  # an alias is the same node: built once, like PyYAML

    def build(self, node: Node | None, where: str) -> Any:
        if node is None:
            return None
        key = id(node)
        if key not in self._built:
            self._built[key] = self._build(node, where)
        return self._built[key]

    def _build(self, node: Node, where: str) -> Any:
        if isinstance(node, MappingNode) and node.tag == _MAP:
            return self._mapping(node, where)
        if isinstance(node, SequenceNode) and node.tag == _SEQ:
            return [self.build(child, f"{where}[{i}]") for i, child in enumerate(node.value)]
        try:
            return self._loader.construct_object(node, deep=True)
        except _UNBUILDABLE as exc:
            self._forget_failure()
            return self._keep(node, where, exc)

    def _mapping(self, node: MappingNode, where: str) -> dict[Any, Any]:
        pairs = list(node.value)
        merge_failed = False
        try:
            self._loader.flatten_mapping(node)
            pairs = list(node.value)
        except _UNBUILDABLE:  # a merge key whose value is no mapping: kept as a field
            node.value = pairs
            merge_failed = True
        built: dict[Any, Any] = {}
        for key_node, value_node in pairs:
            if merge_failed and key_node.tag == _MERGE:
                merge = f"{where}.<<" if where else "<<"
                self._kept.append(f"{merge} (merges no mapping)")
                built["<<"] = self._node_text(value_node)
                continue
            key = self._key(key_node, where)
            inner = f"{where}.{_json_key(key)}" if where else _json_key(key)
            built[key] = self.build(value_node, inner)
        return built

    def _key(self, node: Node, where: str) -> Any:
        if isinstance(node, ScalarNode):
            key = self.build(node, where or "(a key)")
            if not isinstance(key, (list, dict, set)):
                return key
        return self._node_text(node)  # a list or mapping as a key: its text names it

    def _keep(self, node: Node, where: str, problem: BaseException) -> str:
        self._kept.append(f"{where} ({_why_unbuilt(node, problem)})")
        return self._node_text(node)

    def _node_text(self, node: Node) -> str:
        if isinstance(node, ScalarNode):
            return str(node.value)
        return self._raw[node.start_mark.index : node.end_mark.index].strip()

    def _forget_failure(self) -> None:
        """Reset what a failed construction leaves in the loader (the node it was building
        would read as recursive next time)."""
        self._loader.recursive_objects = {}
        self._loader.state_generators = []
        self._loader.deep_construct = False


def _why_unbuilt(node: Node, problem: BaseException) -> str:
    """Return why YAML could not build ``node``'s value, in a few words."""
    tag = node.tag.replace("tag:yaml.org,2002:", "!!")
    if node.tag not in _Loader.yaml_constructors:
        return f"the tag {tag} is unknown"
    detail = ""
    if isinstance(problem, yaml.MarkedYAMLError):
        detail = _one_line(problem.problem or "")
    elif isinstance(problem, ValueError):  # what the number or date is missing; not Python's tip
        detail = _one_line(str(problem)).split("; use ", 1)[0]
    if len(detail) > 80:
        detail = detail[:77] + "..."
    return f"not a valid {tag}{': ' + detail if detail else ''}"


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _within_bounds(raw: str) -> bool:
    """Return True when the text alone shows `_cost_problem` would find nothing (most notes'
    frontmatter: a few flat lines), so the graph need not be walked.

    Without an alias (``*``) every node is reached once: nothing is added to the values written
    and nothing contains itself. A collection owns at least one indicator character no other
    node owns (a block mapping's ``:`` or ``?``, a block sequence's ``-``, a flow collection's
    ``[`` or ``{``), so fewer than `MAX_DEPTH` of them cannot nest deeper than `MAX_DEPTH`.
    """
    return "*" not in raw and sum(raw.count(char) for char in ":-?[{") < MAX_DEPTH


def _cost_problem(root: Node) -> str | None:
    """Return why building ``root``'s values would cost too much, or None if it is fine.

    Walks the node graph once (an alias is the same node reached twice), sizing each node as
    the values under it once aliases are expanded, and its nesting depth.
    """
    expanded: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()  # the nodes on the path from the root to the current one
    stack = [root]
    while stack:
        node = stack[-1]
        key = id(node)
        if key in expanded:
            stack.pop()
            continue
        children = _children(node)
        if key not in open_nodes:
            open_nodes.add(key)
            for child in children:
                if id(child) in open_nodes:
                    return "it contains itself through an alias"
                stack.append(child)
            continue
        stack.pop()
        open_nodes.discard(key)
        expanded[key] = min(_SIZE_CAP, 1 + sum(expanded[id(child)] for child in children))
        depth[key] = 1 + max((depth[id(child)] for child in children), default=0)
        if depth[key] > MAX_DEPTH:
            return f"it nests deeper than {MAX_DEPTH} levels"
    if expanded[id(root)] - len(expanded) > MAX_ALIAS_VALUES:
        return f"its aliases expand it by over {MAX_ALIAS_VALUES:,} values"
    return None


def json_ready(value: Any) -> Any:
    """Return ``value`` as JSON holds it: ``json.loads(json.dumps(result)) == result``.

    The mapping of values JSON has no type for is in this module's docstring.
    """
    if isinstance(value, dict):
        return {_json_key(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [json_ready(v) for v in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, str):
        return value if value.isprintable() else _UNSTORABLE.sub("\ufffd", value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if value in _INT64 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (_dt.date, _dt.datetime, _dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return json_ready(str(value))


def _json_key(key: Any) -> str:
    ready = json_ready(key)
    return ready if isinstance(ready, str) else json.dumps(ready, sort_keys=True)
