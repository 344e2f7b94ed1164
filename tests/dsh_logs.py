"""Where the tests find the dsh harness logs: ``../shared/dsh-logs`` beside the checkout.

The logs are not part of the repository. Where they are absent, every test that reads them is
skipped with the one reason below, so the run says what is missing instead of collecting an empty
parameter set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

DSH_LOGS = Path(__file__).resolve().parents[2] / "shared" / "dsh-logs"
DSH_FILES = sorted(DSH_LOGS.glob("*.jsonl"))
ABSENT = f"the dsh harness logs are absent: no *.jsonl in {DSH_LOGS} (beside the checkout)"

needs_dsh_logs = pytest.mark.skipif(not DSH_FILES, reason=ABSENT)


def dsh_params() -> list[Any]:
    """One parameter per log, or a single skipped parameter naming what is missing."""
    if not DSH_FILES:
        return [pytest.param(None, id="no-dsh-logs", marks=pytest.mark.skip(reason=ABSENT))]
    return [pytest.param(path, id=path.stem) for path in DSH_FILES]
