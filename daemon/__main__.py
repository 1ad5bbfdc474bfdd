"""`python -m daemon` is the `connectd` command."""

from __future__ import annotations

from daemon.cli import main

raise SystemExit(main())
