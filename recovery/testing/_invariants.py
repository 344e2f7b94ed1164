"""``check_invariants(session)``: every property a recovered session must have, checked at once.

The invariants, each reported with the seqs it is about:

- **seq contiguity**: event ``i`` has seq ``i``; times never run backwards;
- **balanced turns and steps**: nothing is open, and the timeline found no numbering or
  pairing rule broken; a step waiting for a person's decision (a call ``awaiting approval``),
  or for its agent once every decision is made (``Diagnosis.awaiting_agent``), is a settled
  state, not an open one: it and its unanswered calls are allowed;
- **every surfaced tool call answered exactly once**: in the model-visible history each
  assistant tool call is followed, before anything else, by exactly one result with its id, in
  the model's order; and in the log no call is left without a ``tool/result``;
- **provider-valid messages**: the history converts to the OpenAI and Anthropic formats;
- **projections == rebuild**: surface, messages, inbox and timeline caught up incrementally
  equal a fold over the whole log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from eventlog import EventLogError, Session, fold_surface
from projections import inbox, messages, timeline, to_anthropic, to_openai

from .._diagnosis import scan

__all__ = ("InvariantViolation", "check_invariants")


class InvariantViolation(AssertionError):
    """A session breaks one or more invariants; ``violations`` lists each, readable."""

    def __init__(self, session_id: str, head: int, violations: Sequence[str]) -> None:
        self.session_id = session_id
        self.head = head
        self.violations = tuple(violations)
        lines = "\n".join(f"  - {v}" for v in self.violations)
        super().__init__(
            f"session {session_id!r} (head {head}) violates {len(self.violations)} "
            f"invariant(s):\n{lines}"
        )


def check_invariants(session: Session) -> None:
    """Check every invariant of a settled (balanced) session. They read the whole log
    synchronously, from the session's window (``session.window(0)``): on a session opened
    from, or trimmed at, a snapshot, ``await session.load_history()`` first (else the checks
    that need older events report :class:`~eventlog.EventNotLoadedError`).

    :raises InvariantViolation: listing every violated invariant, not just the first.
    """
    violations: list[str] = []
    for check in _CHECKS:
        try:
            violations.extend(check(session))
        except EventLogError as exc:  # a projection that cannot even be computed
            violations.append(f"{check.__name__.strip('_')}: {exc}")
    if violations:
        raise InvariantViolation(session.id, session.head, violations)


def _seq_contiguity(session: Session) -> list[str]:
    found = []
    last_time = 0
    for position, event in enumerate(session.window(0)):
        if event.seq != position:
            found.append(f"seq contiguity: event at position {position} has seq {event.seq}")
        if event.time < last_time:
            found.append(f"seq contiguity: seq {event.seq} has time {event.time} < {last_time}")
        last_time = max(last_time, event.time)
    return found


def _waiting(session: Session) -> bool:
    """Whether the open step is settled: it waits for a person's decision, or, every decision
    made, for its agent to go on (what ``scan`` calls not needing repair while open)."""
    diagnosis = scan(session)
    return bool(diagnosis.awaiting_approval) or diagnosis.awaiting_agent


def _balanced(session: Session) -> list[str]:
    view = timeline(session)
    found = []
    waiting = _waiting(session)
    if view.turn is not None and not waiting:
        found.append(f"balance: turn {view.turn.number} (seq {view.turn.seq}) is still open")
    if view.step is not None and not waiting:
        step = view.step
        found.append(f"balance: step {step.turn}.{step.number} (seq {step.seq}) is still open")
    found.extend(f"timeline: {finding.message}" for finding in view.findings)
    held = {call.key for call in view.dangling} if waiting else set()
    found.extend(
        f"answers: call {call.call_id!r} of step {call.turn}.{call.step} "
        f"(proposed at seq {call.proposed}) has no tool/result"
        for call in view.unanswered
        if call.key not in held
    )
    return found


def _answered_once(session: Session) -> list[str]:
    """Walk the model-visible history as a provider would."""
    found: list[str] = []
    pending: list[str] = []  # call ids awaiting results, in the model's order
    for position, message in enumerate(messages(session)):
        where = f"answers: message {position} ({message.role} {message.id!r})"
        if message.role == "tool":
            results = message.tool_results
            if len(results) != 1:
                found.append(f"{where} carries {len(results)} tool results")
                continue
            call_id = results[0].call_id
            if not pending or pending[0] != call_id:
                expected = repr(pending[0]) if pending else "no result"
                found.append(f"{where} answers {call_id!r}; expected {expected}")
                if call_id in pending:
                    pending.remove(call_id)
                continue
            pending.pop(0)
            continue
        if pending:
            found.append(f"{where} comes while {pending} are unanswered")
            pending = []
        if message.role == "assistant":
            if not message.content:
                found.append(f"{where} is empty (it should derive to nothing)")
            ids = [call.id for call in message.tool_calls]
            if len(set(ids)) != len(ids):
                found.append(f"{where} proposes a call id twice: {ids}")
            pending = ids
    if pending and not _waiting(session):
        found.append(f"answers: the history ends while {pending} are unanswered")
    return found


class _AnyAttachment(dict[str, bytes]):
    """Every attachment, as empty bytes (the converters only need something to encode)."""

    def get(self, key: str, default: object = None) -> bytes:
        return b""


def _provider_valid(session: Session) -> list[str]:
    history = messages(session)
    found = []
    for name, convert in (("OpenAI", to_openai), ("Anthropic", to_anthropic)):
        try:
            # The shape is what is checked, not the attachments' bytes (any digest reads as
            # empty bytes here), nor what a provider cannot take by design (an image in an
            # OpenAI chat tool result): that is the app's choice of ``degrade``.
            convert(history, attachments=_AnyAttachment(), degrade="text")
        except EventLogError as exc:
            found.append(f"provider: {name} refuses the history: {exc}")
    return found


def _rebuild(session: Session) -> list[str]:
    head = session.head
    found = []
    nodes = list(fold_surface(list(session.window(0)), session_id=session.id).nodes)
    if list(session.surface_index.nodes) != nodes:
        found.append(f"rebuild: surface {list(session.surface_index.nodes)} != rebuilt {nodes}")
    pairs: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("messages", lambda: list(messages(session)), lambda: list(messages(session, at=head))),
        ("inbox", lambda: inbox(session), lambda: inbox(session, at=head)),
        ("timeline", lambda: timeline(session), lambda: timeline(session, at=head)),
    ]
    for name, live, rebuilt in pairs:
        if live() != rebuilt():
            found.append(f"rebuild: {name} caught up incrementally differs from a rebuild")
    return found


_CHECKS: tuple[Callable[[Session], list[str]], ...] = (
    _seq_contiguity,
    _balanced,
    _answered_once,
    _provider_valid,
    _rebuild,
)
