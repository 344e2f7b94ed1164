"""The dsh logs with images: each image becomes an image part referencing its attachment, sent
as an image to every provider once its bytes are in the store."""

from __future__ import annotations

import pytest

from eventlog import AttachmentNotFoundError, ImagePart, ToolResultPart, open_store
from eventlog.importers import import_dsh
from projections import messages, to_anthropic, to_openai_responses
from tests.dsh_logs import DSH_LOGS, needs_dsh_logs

pytestmark = [pytest.mark.anyio, needs_dsh_logs]

RED = "sha256:b1ff9c8ea3a780bad09b346c423d2d0e46815926879b18e841d928376a946640"


async def test_a_tool_result_image_is_an_image_reference() -> None:
    async with open_store("memory:") as store:
        report = await import_dsh(store, DSH_LOGS / "acp-agent--read-image.jsonl")
        # The report says the bytes are not in the log, and what of the attachment was lost.
        assert any("1 image attachment is referenced by digest" in n for n in report.notes)
        assert report.losses["image part.attachment.name"] == 1
        session = await store.open(report.session_id)
        history = list(messages(session))
        results = [p for m in history for p in m.content if isinstance(p, ToolResultPart)]
        rich = [r.content for r in results if not isinstance(r.content, str)]
        assert len(rich) == 1 and rich[0][1:] == (
            ImagePart(media_type="image/png", attachment=RED),
        )
        assert "image/png image, 1x1 px, 69 bytes" in results[0].text
        # Sending it needs the bytes; without them the store names the digest.
        with pytest.raises(AttachmentNotFoundError, match=f"attachment {RED} is not stored"):
            await store.load_attachments(history)
        # With stand-in bytes under that digest (the real ones are not in the log), it goes
        # out as an image in the tool result.
        stand_in = {RED: b"\x89PNG"}
        blocks = to_anthropic(history, attachments=stand_in)
        tool_results = [b for m in blocks for b in m["content"] if b["type"] == "tool_result"]
        assert [c["type"] for c in tool_results[0]["content"]] == ["text", "image"]
        outputs = [
            i
            for i in to_openai_responses(history, attachments=stand_in)
            if i["type"] == "function_call_output"
        ]
        assert any(item["type"] == "input_image" for item in outputs[0]["output"])
        await session.aclose()
