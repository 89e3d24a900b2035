#!/usr/bin/env bash
# Check vrom's MCP server with a third-party client: the official MCP Inspector CLI.
#
# Indexes examples/vault into a temporary state dir, then runs the Inspector against
# `python -m vrom mcp --vault examples/vault` over stdio: first tools/list, then
# tools/call vault_search query="network switch". Prints both outputs. Exits non-zero if either
# call fails, if tools/list lacks vault_search, or if the search result names no note (*.md).
#
# Environment: VROM_EMBEDDER (default: default, the built-in model; `none` for keyword only),
# PYTHON (default: python, else python3), INSPECTOR (default: the version pinned below).
# Needs Node.js with npx; the first run downloads the Inspector from the npm registry.
set -euo pipefail

INSPECTOR="${INSPECTOR:-@modelcontextprotocol/inspector@2.12.0}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VAULT="$REPO/examples/vault"
PYTHON_BIN="$(command -v "${PYTHON:-python}" || command -v python3 || true)"
if [[ -z "$PYTHON_BIN" ]]; then
  echo "mcp_inspector.sh: no python on PATH (set PYTHON)" >&2
  exit 2
fi
if ! command -v npx >/dev/null; then
  echo "mcp_inspector.sh: npx not found: install Node.js" >&2
  exit 2
fi

export VROM_EMBEDDER="${VROM_EMBEDDER:-default}"
VROM_STATE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/vrom-inspector.XXXXXX")"
export VROM_STATE_DIR
trap 'rm -rf "$VROM_STATE_DIR"' EXIT

echo "== indexing $VAULT (embedder: $VROM_EMBEDDER, state: $VROM_STATE_DIR)"
"$PYTHON_BIN" -m vrom index "$VAULT" --quiet

# The Inspector starts the server with a minimal environment: pass vrom's variables explicitly.
inspect() {
  npx -y "$INSPECTOR" --cli \
    -e "VROM_STATE_DIR=$VROM_STATE_DIR" -e "VROM_EMBEDDER=$VROM_EMBEDDER" \
    --cwd "$REPO" \
    "$PYTHON_BIN" -m vrom mcp --vault "$VAULT" \
    "$@"
}

echo "== tools/list"
if ! listed="$(inspect --method tools/list)"; then
  echo "$listed"
  echo "mcp_inspector.sh: tools/list failed" >&2
  exit 1
fi
echo "$listed"

echo "== tools/call vault_search query=\"network switch\""
if ! found="$(inspect --method tools/call --tool-name vault_search --tool-arg query="network switch")"; then
  echo "$found"
  echo "mcp_inspector.sh: tools/call vault_search failed" >&2
  exit 1
fi
echo "$found"

LISTED="$listed" FOUND="$found" "$PYTHON_BIN" - <<'EOF'
import json, os, sys


def note_paths(value):
    """Yield every "path" ending in .md, also inside JSON text content."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "path" and isinstance(item, str) and item.endswith(".md"):
                yield item
            elif key == "text" and isinstance(item, str):
                try:
                    yield from note_paths(json.loads(item))
                except ValueError:
                    pass
            else:
                yield from note_paths(item)
    elif isinstance(value, list):
        for item in value:
            yield from note_paths(item)


tools = [tool["name"] for tool in json.loads(os.environ["LISTED"]).get("tools", [])]
if "vault_search" not in tools:
    sys.exit(f"mcp_inspector.sh: tools/list has no vault_search: {tools}")
result = json.loads(os.environ["FOUND"])
if result.get("isError"):
    sys.exit("mcp_inspector.sh: vault_search returned an error")
paths = sorted(set(note_paths(result)))
if not paths:
    sys.exit("mcp_inspector.sh: vault_search named no note path")
print(f"== ok: {len(tools)} tools; vault_search found {', '.join(paths[:5])}")
EOF
