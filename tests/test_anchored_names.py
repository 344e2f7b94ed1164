"""Every name the library checks by pattern is checked in full: ``$`` in a Python pattern also
matches before a final newline, so ``"sha256:<hex>\\n"`` passed as a digest and ``"app_\\n"`` as
a table prefix. Each is refused with a ValidationError, before anything is stored or created.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from eventlog import (
    APPEND,
    EventTypes,
    FilePart,
    ImagePart,
    ValidationError,
    attachment_digest,
    open_store,
    validate_session_id,
)

pytestmark = pytest.mark.anyio

DIGEST = attachment_digest(b"bytes")
NEWLINE = DIGEST + "\n"


class Note(msgspec.Struct, frozen=True, kw_only=True):
    text: str


@pytest.mark.parametrize("part", [ImagePart, FilePart])
def test_a_part_refuses_a_digest_with_a_final_newline(part: type[ImagePart]) -> None:
    # The digest as attachment_digest gives it is taken; with a newline after it, refused.
    assert part(media_type="image/png", attachment=DIGEST).attachment == DIGEST
    with pytest.raises(ValueError, match="64 lowercase hex digits"):
        part(media_type="image/png", attachment=NEWLINE)


async def test_a_committed_message_with_such_a_digest_is_refused_and_changes_nothing() -> None:
    async with open_store("memory:") as store:
        session = await store.create()
        content = [{"type": "image", "media_type": "image/png", "attachment": NEWLINE}]
        message = {"id": "m", "role": "user", "content": content}
        # A dict payload is decoded: the part's check runs there, a ValidationError naming it.
        with pytest.raises(ValidationError, match=r"attachment must be .* at `\$.message"):
            session.append("user/message", {"message": message}, surface=APPEND)
        assert session.head == -1


async def test_get_attachment_refuses_such_a_digest(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        assert await store.put_attachment(b"bytes") == DIGEST
        # Before: looked up as another (unknown) digest, AttachmentNotFoundError.
        with pytest.raises(ValidationError, match="64 lowercase hex digits"):
            await store.get_attachment(NEWLINE)
        assert await store.get_attachment(DIGEST) == b"bytes"


async def test_a_table_prefix_with_a_final_newline_is_refused_before_the_file_is_made(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    # Before: a StoreWriteError from SQLite's parser, the database file left behind.
    with pytest.raises(ValidationError, match="table_prefix"):
        async with open_store(f"sqlite:///{path}", table_prefix="app_\n"):
            pass
    assert not path.exists()


def test_session_ids_and_type_names_are_checked_in_full() -> None:
    # The other patterns, for the record: already whole-string matches.
    with pytest.raises(ValidationError):
        validate_session_id("abc\n")
    with pytest.raises(ValidationError):
        EventTypes().register("app/note\n", Note)
