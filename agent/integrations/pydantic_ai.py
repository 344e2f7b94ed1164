"""pydantic-ai on eventlog: :class:`EventlogHistory` and :class:`DurableToolset` (extra
``pydantic-ai``).

Making an agent's message history durable::

    async with open_store("sqlite:///sessions.db", types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "conversation-1")
        result = await agent.run(
            "hello", message_history=history.messages(), toolsets=[history.durable(tools)]
        )
        await history.record(result)

Messages are core events (``user/message``, ``assistant/message``, ``tool/call``,
``tool/result``, in turns and steps), so ``eventlog audit``, ``replay`` and recovery read them;
each message's exact form is a ``pydantic_ai/message`` event (ignorable, importing without
pydantic-ai, so a reader such as the ``eventlog`` command registers it whether the extra is
installed or not). :class:`EventlogHistory` and :class:`DurableToolset` import pydantic-ai
when first named.
"""

from typing import TYPE_CHECKING, Any

from eventlog import needs_extra as _needs_extra

from ._pydantic_ai_events import (
    MESSAGE,
    Spelled,
    pydantic_ai_types,
    register_pydantic_ai_types,
)

if TYPE_CHECKING:
    from ._pydantic_ai_history import EventlogHistory
    from ._pydantic_ai_tools import DurableToolset

__all__ = (
    "MESSAGE",
    "DurableToolset",
    "EventlogHistory",
    "Spelled",
    "pydantic_ai_types",
    "register_pydantic_ai_types",
)


def __getattr__(name: str) -> Any:
    # The history and the toolset import pydantic-ai (an optional extra): only when asked for.
    if name in ("DurableToolset", "EventlogHistory"):
        with _needs_extra(
            "pydantic-ai", f"{__name__}.{name}", "pydantic_ai", "pydantic", "pydantic_core"
        ):
            from . import _pydantic_ai_history, _pydantic_ai_tools

        module = _pydantic_ai_history if name == "EventlogHistory" else _pydantic_ai_tools
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
