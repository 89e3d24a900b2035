"""Knowledge packs ("vROMs"): build, publish, fetch, verify, cache and mount prebuilt stores.

See docs/packs.md for the formats. A pack is a vrom store file plus its HNSW graph file and a
manifest naming both with their SHA-256; the registry is one JSON file listing packs.
"""
