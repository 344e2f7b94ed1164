"""The PostgreSQL store's URL: split into asyncpg's DSN, the ``schema`` option and the URL shown
in messages (password masked), and a malformed URL refused as a :class:`ValidationError`.

asyncpg parses the DSN only when it connects, and some malformed URLs (a port that is not a
number or out of range, an unclosed IPv6 bracket) then escape as a bare ``ValueError`` or
``OverflowError``; :func:`split_url` refuses them up front, and :func:`malformed` names the URL
for whatever asyncpg still refuses at connect time.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..._errors import ValidationError

__all__ = ("malformed", "split_url")

_MAX_PORT = 65535


def malformed(shown: str, reason: object) -> ValidationError:
    """The error for a URL asyncpg cannot use (``shown`` is the URL without its password)."""
    return ValidationError(
        f"malformed PostgreSQL URL {shown!r}: {reason}",
        hint="use postgresql://user[:password]@host[:port]/database[?schema=name]",
    )


def split_url(url: str) -> tuple[str, str | None, str]:
    """``(dsn for asyncpg, schema from the query, url without password)``.

    :raises ValidationError: the URL does not parse, or a host's port is not 1..65535.
    """
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError as exc:  # an unclosed IPv6 bracket: nothing to mask, show the scheme
        raise malformed(f"{url.partition('://')[0]}://…", exc) from None
    netloc = parts.netloc
    if password is not None:
        netloc = netloc.replace(f":{password}@", ":***@", 1)
    shown = urlunsplit(parts._replace(netloc=netloc))
    for host in parts.netloc.rpartition("@")[2].split(","):  # asyncpg takes several hosts
        _check_port(host, shown)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema, shown


def _check_port(host: str, shown: str) -> None:
    port = host.rpartition("]")[2] if host.startswith("[") else host
    if ":" not in port:
        return
    # An empty port is the default one, as libpq reads it.
    digits = port.rpartition(":")[2]
    if digits and not (digits.isascii() and digits.isdigit() and 0 < int(digits) <= _MAX_PORT):
        raise malformed(shown, f"port {digits!r} is not a number from 1 to {_MAX_PORT}")
