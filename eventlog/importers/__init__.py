"""Importers: session logs written by other tools, read into eventlog sessions.

``import_dsh`` reads DeepSeek Harness (dsh) version-0 JSONL logs. Importers use only the
``eventlog`` layer.
"""

from ._dsh import EXTENSION_PREFIX, FOLDED_TYPES, ORIGINAL_TYPE, ImportReport, Refusal, import_dsh
from ._dsh_format import (
    DSH_FORMAT_VERSION,
    DshFormatError,
    DshLog,
    DshRecord,
    parse_dsh,
    read_dsh_lines,
)
from ._dsh_messages import dsh_message

__all__ = (
    "DSH_FORMAT_VERSION",
    "EXTENSION_PREFIX",
    "FOLDED_TYPES",
    "ORIGINAL_TYPE",
    "DshFormatError",
    "DshLog",
    "DshRecord",
    "ImportReport",
    "Refusal",
    "dsh_message",
    "import_dsh",
    "parse_dsh",
    "read_dsh_lines",
)
