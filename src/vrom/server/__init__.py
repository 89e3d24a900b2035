"""The MCP server: a vault's notes and an agent's memories as MCP tools and resources.

``vrom mcp`` runs it over stdio (what desktop clients launch) or streamable HTTP. The tools are
thin: each parses its arguments, calls the SDK (`vrom.Vault`, `vrom.memories.Memories`) in a
worker thread, and returns the same JSON shapes the CLI prints; a `VromError` becomes an
``isError`` result carrying its one-line message. Nothing but protocol goes to stdout; logs and
progress go to stderr.

Needs the ``mcp`` extra (the official MCP Python SDK): ``pip install 'vrom[mcp]'``.
"""
