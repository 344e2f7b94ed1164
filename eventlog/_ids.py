"""Session ids: validated, never used as file paths."""

from __future__ import annotations

import re
import uuid

from ._errors import ValidationError
from ._strict import shown

__all__ = ("new_session_id", "validate_session_id")

_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")


def validate_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is a valid id.

    Valid ids are 1–128 characters: letters, digits and ``. _ : @ -``, starting with a letter
    or digit.

    :raises ValidationError: naming the id and the rule it breaks.
    """
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise ValidationError(
            f"session id {shown(session_id)} is not valid: use 1-128 letters, digits or '._:@-', "
            "starting with a letter or digit",
            hint="ids are never paths; pick a plain identifier",
        )
    return session_id


def new_session_id() -> str:
    """A fresh random session id."""
    return uuid.uuid4().hex
