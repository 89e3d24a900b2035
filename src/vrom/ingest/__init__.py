"""Ingestion engine: walk a vault, parse notes, chunk them and write them to the store."""
