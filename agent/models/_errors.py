"""Provider SDK errors as :class:`~agent.ModelError`: what may be retried, and when.

Both official SDKs (``openai``, ``anthropic``) raise the same shapes: ``APIStatusError`` with the
HTTP response, ``APIConnectionError`` (``APITimeoutError`` among them) for transport failures,
and the HTTP library's own ``TransportError`` when a stream breaks after its headers arrived.
The adapters turn their SDK's retries off, so every attempt is the agent's and is logged.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._loop._model import ModelError

__all__ = ("provider_errors", "provider_message", "retry_after")


def provider_message(exc: Any) -> str:
    """The provider's own error message (``error.message`` of the body), else the SDK's."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return str(exc.message)


def retry_after(headers: Any) -> float | None:
    """Seconds from a ``retry-after-ms`` or ``retry-after`` header (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value.strip() else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


@contextmanager
def provider_errors(sdk: Any, provider: str) -> Iterator[None]:
    """Translate ``sdk``'s errors (and a broken stream) into :class:`ModelError`, chained.

    429, 408, 409 and 5xx are retryable, with the provider's retry-after; other 4xx are not and
    carry the provider's message; transport errors and timeouts are retryable. A response's
    ``x-should-retry: true`` or ``false`` overrides the status, as the SDKs' own retries obey it.
    """
    import httpx2  # the SDKs' HTTP library: imported with them, never by agent itself

    try:
        yield
    except sdk.APIStatusError as exc:
        status = int(exc.status_code)
        if status < 400:  # an error event inside a stream that had started fine (overloaded)
            message = provider_message(exc)
            raise ModelError(f"{provider}: error in the stream: {message}") from exc
        retryable = status in (408, 409, 429) or status >= 500
        should_retry = exc.response.headers.get("x-should-retry")
        if should_retry in ("true", "false"):
            retryable = should_retry == "true"
        raise ModelError(
            f"{provider}: HTTP {status}: {provider_message(exc)}",
            retryable=retryable,
            retry_after=retry_after(exc.response.headers) if retryable else None,
            status=status,
        ) from exc
    except sdk.APIConnectionError as exc:
        cause = f" ({exc.__cause__})" if str(exc.__cause__ or "") else ""
        raise ModelError(f"{provider}: {type(exc).__name__}: {exc}{cause}") from exc
    except httpx2.TransportError as exc:
        raise ModelError(f"{provider}: the stream broke: {type(exc).__name__}: {exc}") from exc
    except sdk.APIError as exc:  # an error event inside the stream
        raise ModelError(f"{provider}: {exc.message}") from exc
