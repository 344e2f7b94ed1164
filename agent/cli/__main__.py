"""``python -m agent.cli`` (the same as ``python -m eventlog``)."""

from ._main import main

raise SystemExit(main())
