"""Run the CLI: ``python -m vrom``."""

from vrom.cli import main

raise SystemExit(main())
