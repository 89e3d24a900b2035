"""Search engine: turn user queries and filters into store queries, rank, excerpt and format."""
