"""The timeline's fold: one handler per event type (see :mod:`projections._timeline`).

Each handler moves the calls and the open turn and step on, and records a finding where the
event breaks the numbering or pairing rules; none raises, whatever the log holds.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from eventlog import Event, Replace, ToolCallPart, ToolResultPart

from ._timeline_state import OpenStep, OpenTurn, TimelineState, ToolCallState

__all__ = ("HANDLERS",)


def _turn_start(state: TimelineState, event: Event) -> None:
    number: int = event.data.turn
    if state.turn is not None:
        state.find(event.seq, f"turn/start {number} while turn {state.turn.number} is open")
    if number != state.last_turn + 1:
        state.find(event.seq, f"turn/start numbers turn {number}, expected {state.last_turn + 1}")
    state.turn = OpenTurn(number=number, seq=event.seq)
    state.step = None
    state.step_calls, state.step_proposed = [], 0
    state.last_turn = max(state.last_turn, number)
    state.last_step = 0


def _turn_end(state: TimelineState, event: Event) -> None:
    number: int = event.data.turn
    if state.turn is None:
        state.find(event.seq, f"turn/end {number} with no open turn")
    elif state.turn.number != number:
        state.find(event.seq, f"turn/end {number} while turn {state.turn.number} is open")
    if state.step is not None:
        state.find(event.seq, f"turn/end {number} while step {state.step.number} is open")
    state.turn = None
    state.step = None
    state.step_calls, state.step_proposed = [], 0


def _step_start(state: TimelineState, event: Event) -> None:
    turn: int = event.data.turn
    number: int = event.data.step
    if state.turn is None or state.turn.number != turn:
        state.find(event.seq, f"step/start {turn}.{number} outside turn {turn}")
    if state.step is not None:
        state.find(event.seq, f"step/start {turn}.{number} while step {state.step.number} is open")
    if number != state.last_step + 1:
        state.find(event.seq, f"step/start numbers step {number}, expected {state.last_step + 1}")
    state.step = OpenStep(turn=turn, number=number, seq=event.seq)
    state.step_calls, state.step_proposed = [], 0
    state.last_step = max(state.last_step, number)


def _step_end(state: TimelineState, event: Event) -> None:
    turn: int = event.data.turn
    number: int = event.data.step
    step = state.step
    if step is None or (step.turn, step.number) != (turn, number):
        state.find(event.seq, f"step/end {turn}.{number} does not close the open step")
    state.step = None
    state.step_calls, state.step_proposed = [], 0


def _in_open_step(state: TimelineState, event: Event, turn: int, step: int) -> bool:
    open_step = state.step
    if open_step is None or (open_step.turn, open_step.number) != (turn, step):
        state.find(event.seq, f"{event.type} for step {turn}.{step} outside the open step")
        return False
    return True


def _assistant_message(state: TimelineState, event: Event) -> None:
    if isinstance(event.surface, Replace):
        return  # a replacement proposes nothing new (the surface refuses unbalanced ones)
    data = event.data
    calls = [part for part in data.message.content if type(part) is ToolCallPart]
    if not calls:
        return
    turn: int = data.turn
    step: int = data.step
    in_step = _in_open_step(state, event, turn, step)
    index = state.step_proposed if in_step else _proposed_in(state, turn, step)
    for part in calls:
        key = (turn, step, part.id)
        known = state.latest(key)
        if known is not None and known.proposed is not None:
            state.find(event.seq, f"call {part.id!r} of step {turn}.{step} proposed twice")
            continue
        if known is not None:
            state.find(
                event.seq,
                f"call {part.id!r} was started at seq {known.call} before it was proposed",
            )
            state.put(key, msgspec.structs.replace(known, index=index, proposed=event.seq))
            if known.result is None:
                state.unanswered[key] = None
        else:
            state.put(
                key,
                ToolCallState(
                    turn=turn,
                    step=step,
                    call_id=part.id,
                    name=part.name,
                    index=index,
                    proposed=event.seq,
                ),
            )
            if in_step:
                state.step_calls.append(key)
            state.unanswered[key] = None
        index += 1
    if in_step:
        state.step_proposed = index


def _proposed_in(state: TimelineState, turn: int, step: int) -> int:
    """How many calls were proposed in a step that is not the open one (a finding; rare)."""
    return sum(
        1
        for key in state.history
        if key[:2] == (turn, step) and (s := state.latest(key)) is not None and s.index is not None
    )


def _tool_call(state: TimelineState, event: Event) -> None:
    data = event.data
    key = (data.turn, data.step, data.call_id)
    _in_open_step(state, event, data.turn, data.step)
    known = state.latest(key)
    if known is None:
        state.find(event.seq, f"tool/call {data.call_id!r} was never proposed")
        called = ToolCallState(
            turn=data.turn, step=data.step, call_id=data.call_id, name=data.name, call=event.seq
        )
        state.put(key, called)
        if state.step is not None and (state.step.turn, state.step.number) == key[:2]:
            state.step_calls.append(key)
        return
    if known.call is not None:
        state.find(event.seq, f"tool/call {data.call_id!r} already logged at seq {known.call}")
        return
    state.put(key, msgspec.structs.replace(known, call=event.seq))


def _tool_outcome(state: TimelineState, event: Event) -> None:
    data = event.data
    key = (data.turn, data.step, data.call_id)
    _in_open_step(state, event, data.turn, data.step)
    known = state.latest(key)
    if known is None or known.call is None:
        state.find(event.seq, f"tool/outcome for {data.call_id!r} without a tool/call")
        if known is None:
            return
    if known.outcome is not None:
        state.find(
            event.seq, f"tool/outcome {data.call_id!r} already logged at seq {known.outcome}"
        )
        return
    state.put(key, msgspec.structs.replace(known, outcome=event.seq))


def _tool_result(state: TimelineState, event: Event) -> None:
    if isinstance(event.surface, Replace):
        return  # pruning: the surface checked it shadows exactly one result of the same call
    data = event.data
    content = data.message.content
    if len(content) != 1 or type(content[0]) is not ToolResultPart:
        parts = [part for part in content if type(part) is ToolResultPart]
        state.find(event.seq, f"tool/result carries {len(parts)} tool results, expected 1")
        if not parts:
            return
        content = parts
    call_id: str = content[0].call_id
    key = (data.turn, data.step, call_id)
    _in_open_step(state, event, data.turn, data.step)
    known = state.latest(key)
    if known is None or known.proposed is None:
        state.find(event.seq, f"tool/result answers {call_id!r}, which was never proposed")
        if known is None:
            return
    if known.result is not None:
        state.find(
            event.seq, f"tool/result answers {call_id!r} again (first at seq {known.result})"
        )
        return
    state.put(key, msgspec.structs.replace(known, result=event.seq))
    state.unanswered.pop(key, None)


def _approval_request(state: TimelineState, event: Event) -> None:
    data = event.data
    key = (data.turn, data.step, data.call_id)
    _in_open_step(state, event, data.turn, data.step)
    known = state.latest(key)
    if known is None or known.proposed is None:
        state.find(event.seq, f"tool/approval-request for {data.call_id!r}, never proposed")
        return
    if known.requested is not None or known.call is not None:
        first = known.requested if known.requested is not None else known.call
        state.find(
            event.seq,
            f"tool/approval-request for {data.call_id!r} after its seq {first} (a decision "
            "is asked before the call starts, once)",
        )
        return
    state.put(key, msgspec.structs.replace(known, requested=event.seq))


def _approval(state: TimelineState, event: Event) -> None:
    data = event.data
    key = (data.turn, data.step, data.call_id)
    _in_open_step(state, event, data.turn, data.step)
    known = state.latest(key)
    if known is None or known.requested is None:
        state.find(event.seq, f"tool/approval for {data.call_id!r}, which asked for none")
        return
    if known.decided is not None:
        state.find(
            event.seq, f"tool/approval for {data.call_id!r} again (first at seq {known.decided})"
        )
        return
    decided = msgspec.structs.replace(known, decided=event.seq, decision=data.decision)
    state.put(key, decided)


HANDLERS: dict[str, Callable[[TimelineState, Event], None]] = {
    "turn/start": _turn_start,
    "turn/end": _turn_end,
    "step/start": _step_start,
    "step/end": _step_end,
    "assistant/message": _assistant_message,
    "tool/call": _tool_call,
    "tool/approval-request": _approval_request,
    "tool/approval": _approval,
    "tool/outcome": _tool_outcome,
    "tool/result": _tool_result,
}
