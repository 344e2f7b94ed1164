"""What a session says about its run, classed once for every view: each tool call's fate with
the seqs that prove it, failed model attempts, and the session's state (``running`` when
:func:`eventlog.stores.writer_alive` says its writer is alive)."""

from ._fates import (
    FAILED_FATES as FAILED_FATES,
)
from ._fates import (
    Fate as Fate,
)
from ._fates import (
    SessionState as SessionState,
)
from ._fates import (
    call_arguments as call_arguments,
)
from ._fates import (
    call_error as call_error,
)
from ._fates import (
    call_fate as call_fate,
)
from ._fates import (
    call_row as call_row,
)
from ._fates import (
    failed_attempts as failed_attempts,
)
from ._fates import (
    session_state as session_state,
)

__all__ = (
    "FAILED_FATES",
    "Fate",
    "SessionState",
    "call_arguments",
    "call_error",
    "call_fate",
    "call_row",
    "failed_attempts",
    "session_state",
)
