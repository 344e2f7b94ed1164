"""What both provider adapters share: the client they own or borrow, and the stream loop.

An adapter subclass says which SDK and client class it uses, how a request becomes a body
(:meth:`ProviderModel.body`), which keys of it the SDK call takes by name, how it creates the
stream, and a per-stream state that maps each SDK event to chunks and settles the finish.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, Self

from projections import Degrade

from .._loop._checks import check_choice, check_optional_str, check_seconds, check_str, refuse
from .._loop._model import Chunk, Finish, ModelRequest
from ._errors import provider_errors

__all__ = ("ProviderModel", "StreamState")


class StreamState(Protocol):
    """One stream's progress: chunks for each SDK event, then the finish (or a raise)."""

    def feed(self, event: Any) -> Sequence[Chunk]: ...

    def finish(self) -> Finish: ...


class ProviderModel:
    """The shared half of an adapter (see :class:`~agent.models.OpenAIChat` for the contract).

    :cvar provider: the name errors start with.
    :cvar required: body keys passed to the SDK by name; the rest go as ``extra_body``, so a
        server's own parameters pass through whether the SDK version knows them or not.
    """

    provider: ClassVar[str]
    required: ClassVar[tuple[str, ...]]
    #: The ``projections`` builder of the provider's body, and the keys that make it stream.
    build: ClassVar[Callable[..., dict[str, Any]]]
    streaming: ClassVar[Mapping[str, Any]]
    #: The SDK's async client classes the adapter takes (``AsyncOpenAI`` and its Azure
    #: subclass; ``AsyncAnthropic`` and the Bedrock and Vertex ones), by name.
    client_classes: ClassVar[tuple[str, ...]]

    def __init__(
        self, sdk: Any, model: str, client: Any, timeout: float, degrade: Degrade, **made: Any
    ) -> None:
        where = type(self).__name__
        self._sdk = sdk
        self._model = check_str(where, "model", model)
        self.degrade: Degrade = check_choice(where, "degrade", degrade, ("refuse", "text", "drop"))  # type: ignore[assignment]
        check_seconds(where, "timeout", timeout, positive=True)
        for name, value in made.items():
            check_optional_str(where, name, value)
        self._owned = client is None
        if client is None:
            client = self._make_client(**made)
        else:
            classes = tuple(
                getattr(sdk, name) for name in self.client_classes if hasattr(sdk, name)
            )
            if not isinstance(client, classes):
                names = " or ".join(f"{sdk.__name__}.{name}" for name in self.client_classes)
                expected = f"an async client ({names}) or None"
                raise refuse(where, "client", expected, client)
            given = [name for name, value in made.items() if value is not None]
            if given:  # they would be silently ignored: the client has its own
                raise refuse(where, given[0], "None when a client is given", made[given[0]])
        # Every attempt is one request: the agent retries, and logs each failed attempt.
        self.client = client.with_options(timeout=timeout, max_retries=0)

    def _make_client(self, *, base_url: str | None, api_key: str | None) -> Any:
        raise NotImplementedError

    @property
    def name(self) -> str:
        return self._model

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} model={self._model!r} base_url={str(self.client.base_url)!r}>"
        )

    async def aclose(self) -> None:
        """Close the client if this adapter made it (a client passed in stays open)."""
        if self._owned:
            await self.client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (what the server receives): the provider's
        ``projections`` builder's body, with the keys that make it stream.

        :raises ValidationError: a part the provider cannot take (unless :attr:`degrade` says
            how to send it), or an attachment the request does not carry the bytes of.
        """
        body = type(self).build(
            request.messages,
            system=request.system,
            tools=request.tools,
            model=request.model or self._model,
            params=request.params,
            attachments=request.attachments,
            degrade=self.degrade,
        )
        body.update(copy.deepcopy(dict(self.streaming)))
        return body

    def _state(self) -> StreamState:
        raise NotImplementedError

    async def _create(self, required: dict[str, Any], extra: dict[str, Any]) -> Any:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Stream the reply to ``request``: deltas, then one :class:`~agent.Finish`.

        :raises ValidationError: the request cannot be expressed for the provider (see
            :meth:`body`); raised before anything is sent.
        :raises ModelError: the request failed, the stream broke or carried an error, or it
            ended without saying how it finished.
        """
        body = self.body(request)
        required = {key: body.pop(key) for key in self.required}
        state = self._state()
        with provider_errors(self._sdk, self.provider):
            stream = await self._create(required, body)
            async with stream:  # closes the HTTP response, also when the consumer stops early
                async for event in stream:
                    for chunk in state.feed(event):
                        yield chunk
        yield state.finish()
