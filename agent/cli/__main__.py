"""``python -m agent.cli`` (the same as ``python -m eventlog``)."""

from .main import main

raise SystemExit(main())
