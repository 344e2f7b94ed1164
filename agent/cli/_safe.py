"""Stored text shown as data on a terminal: the one rule every printed string goes through.

Agent logs hold whatever tools and models produced: ``ls --color`` output, prompt-injected
text, a crafted tool name. Printed raw, an escape sequence in it would retitle the window
(OSC 0), write the clipboard (OSC 52), hide a hyperlink (OSC 8), clear the screen (CSI 2J), or
reorder what the auditor reads (bidi overrides). :func:`terminal_safe` turns every such
character into its ``\\uXXXX`` escape, which is both readable and valid inside a JSON string
(so the same guard also covers JSON output, where msgspec escapes only C0 controls).

Kept as they are: newline and tab, and the joiners emoji and some scripts need (ZWNJ, ZWJ).
Escaped: every other control character (C0, DEL, C1), line and paragraph separators, format
characters (bidi embeddings, overrides and isolates, zero-width space, invisible tag
characters), and lone surrogates.
"""

from __future__ import annotations

import re
from typing import IO, Any

__all__ = ("KEPT", "SafeStream", "terminal_safe")

#: Every unsafe code point (tests check it covers this Python's Unicode database): C0 but
#: newline and tab, DEL and C1, soft hyphen, the Arabic and Syriac format marks, the Mongolian
#: vowel separator, zero-width space, LRM/RLM, line and paragraph separators, the bidi
#: embeddings, overrides and isolates, invisible operators, surrogates, BOM, interlinear
#: annotations, the Egyptian, shorthand and musical format controls, and the tag characters
#: (invisible text some prompt injections hide in). ZWNJ and ZWJ (U+200C/D) are kept.
_UNSAFE_CLASS = (
    r"\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    r"\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    r"\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    r"\U000e0000-\U000e007f"
)
#: The characters that are never escaped although their category is.
KEPT = frozenset("\n\t\u200c\u200d")


_UNSAFE = re.compile(f"[{_UNSAFE_CLASS}]")


def _escape(match: re.Match[str]) -> str:
    point = ord(match.group())
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    # Outside the BMP, as JSON writes it: a surrogate pair of escapes.
    point -= 0x10000
    return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every character a terminal could act on (or hide) replaced by its
    ``\\uXXXX`` escape; newline and tab kept. Unchanged (the same object) when clean."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape, text)


class SafeStream:
    """A text stream whose every write goes through :func:`terminal_safe`: what a command
    writes to it (plain lines, JSON documents, JSON lines) cannot drive the terminal, whatever
    the stored content. ``buffer`` is the underlying binary stream, for formats that must stay
    byte for byte as stored (``export``'s JSONL)."""

    def __init__(self, stream: IO[str]) -> None:
        self.raw = stream

    def write(self, text: str) -> int:
        self.raw.write(terminal_safe(text))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        try:
            return self.raw.isatty()
        except (AttributeError, ValueError):
            return False

    def fileno(self) -> int:
        return self.raw.fileno()

    @property
    def buffer(self) -> Any:
        return getattr(self.raw, "buffer", None)
