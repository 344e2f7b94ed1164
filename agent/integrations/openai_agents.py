"""The OpenAI Agents SDK on eventlog: :class:`EventlogSession` and :class:`EventlogHooks`
(extra ``openai-agents``).

Switching an app over::

    async with open_store("sqlite:///sessions.db", types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "conversation-1")
        result = await Runner.run(agent, "hello", session=session, hooks=session.hooks)

Items are core events (``user/message``, ``assistant/message``, ``tool/call``,
``tool/result``, and ``tool/approval-request`` / ``tool/approval`` for ``needs_approval``
tools), so ``eventlog audit``, ``replay``, ``approve`` and recovery read them; the session's
own types (``openai_agents/items``, ``/pop``, ``/clear``, ``/run-state``) are ignorable and
import without the SDK, so a reader such as the ``eventlog`` command registers them whether
the extra is installed or not. :class:`EventlogHooks` imports the SDK when first named.
"""

from typing import TYPE_CHECKING, Any

from eventlog import needs_extra as _needs_extra

from ._openai_agents_approvals import SDK_DECIDER
from ._openai_agents_events import (
    CLEAR,
    ITEMS,
    POP,
    RUN_STATE,
    Cleared,
    Items,
    Popped,
    SavedRunState,
    openai_agents_types,
    register_openai_agents_types,
)
from ._openai_agents_session import EventlogSession

if TYPE_CHECKING:
    from ._openai_agents_hooks import EventlogHooks

__all__ = (
    "CLEAR",
    "ITEMS",
    "POP",
    "RUN_STATE",
    "SDK_DECIDER",
    "Cleared",
    "EventlogHooks",
    "EventlogSession",
    "Items",
    "Popped",
    "SavedRunState",
    "openai_agents_types",
    "register_openai_agents_types",
)


def __getattr__(name: str) -> Any:
    # The hooks subclass the SDK's RunHooks (an optional extra): imported only when asked for.
    if name == "EventlogHooks":
        with _needs_extra("openai-agents", f"{__name__}.{name}", "agents"):
            from ._openai_agents_hooks import EventlogHooks

        return EventlogHooks
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
