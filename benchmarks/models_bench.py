"""What ``OpenAIChat`` adds per streamed chunk, against iterating the raw SDK stream.

A loopback provider server (the tests' own, in a process of its own so it does not share this
one's GIL) streams the same Chat Completions reply for every request: text deltas, then a tool
call in pieces. Each run iterates it once through ``AsyncOpenAI`` alone (``async for chunk in
stream``) and once through ``OpenAIChat.stream`` (the same SDK stream mapped to chunks), in
alternating order; the figure is the difference per chunk. The server sends each reply as one
body, so the client parses at its own speed. The mapping alone (``ChatCompletionChunk`` objects
already parsed, fed to the adapter's state) is timed too.
"""

from __future__ import annotations

import multiprocessing
import time
from functools import partial
from multiprocessing.connection import Connection
from typing import Any

import anyio

from ._harness import Figure, Stats, print_figure

__all__ = ("main",)

_REPLIES = 64


def _events(chunks: int) -> list[dict[str, Any]]:
    from tests.llm_server import openai_events

    text = "token " * (chunks * 6 // 7)
    arguments = '{"q": "' + "x" * (chunks // 7 * 6) + '"}'
    usage = {"prompt_tokens": 10, "completion_tokens": chunks, "total_tokens": chunks + 10}
    return openai_events(text=text, calls=[("c1", "search", arguments)], usage=usage, size=6)


def _serve(chunks: int, conn: Connection) -> None:
    from tests.llm_server import LLMServer, Reply

    events = _events(chunks)
    with LLMServer(*[Reply(events=events, burst=True) for _ in range(_REPLIES)]) as server:
        conn.send(server.url)
        conn.recv()  # until the benchmark is done


async def _raw(client: Any, body: dict[str, Any]) -> tuple[float, int]:
    start = time.perf_counter()
    stream = await client.chat.completions.create(**body)
    count = 0
    async with stream:
        async for _chunk in stream:
            count += 1
    return time.perf_counter() - start, count


async def _adapter(model: Any, request: Any) -> tuple[float, int]:
    start = time.perf_counter()
    count = 0
    async for _chunk in model.stream(request):
        count += 1
    return time.perf_counter() - start, count


async def _loopback(url: str, runs: int) -> tuple[Stats, Stats, int]:
    from agent import ModelRequest
    from agent.models import OpenAIChat
    from eventlog import Message

    model = OpenAIChat("bench", base_url=f"{url}/v1", api_key="bench")
    request = ModelRequest(messages=[Message.user("go")])
    body = model.body(request)
    raw_times: list[float] = []
    adapter_times: list[float] = []
    chunks = 0
    async with model:
        await _raw(model.client, body)  # warm up both paths
        await _adapter(model, request)
        for run in range(runs):
            first, second = (_raw, _adapter) if run % 2 else (_adapter, _raw)
            for path in (first, second):
                args = (model.client, body) if path is _raw else (model, request)
                seconds, count = await path(*args)
                (raw_times if path is _raw else adapter_times).append(seconds)
                chunks = count if path is _raw else chunks
    return Stats(tuple(raw_times)), Stats(tuple(adapter_times)), chunks


def _mapping_only(chunks: int, runs: int) -> Stats:
    from openai.types.chat import ChatCompletionChunk

    from agent.models._openai import _State

    parsed = [
        ChatCompletionChunk.model_validate(e["data"])
        for e in _events(chunks)
        if e["data"] != "[DONE]"
    ]
    values = []
    for _ in range(runs):
        state = _State()
        start = time.perf_counter()
        for chunk in parsed:
            state.feed(chunk)
        state.finish()
        values.append((time.perf_counter() - start) / len(parsed) * 1e6)
    return Stats(tuple(values))


def main(quick: bool = False) -> None:
    runs = 5 if quick else 15
    size = 1000 if quick else 4000
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(size, theirs), daemon=True)
    server.start()
    try:
        url = ours.recv()
        raw, adapted, chunks = anyio.run(partial(_loopback, url, runs))
    finally:
        ours.send("stop")
        server.join(30)
    per_chunk = Stats(
        tuple((a - r) / chunks * 1e6 for a, r in zip(adapted.values, raw.values, strict=True))
    )
    print_figure(Figure(f"raw SDK stream, {chunks:,} chunks, per chunk", _us(raw, chunks), "µs"))
    print_figure(Figure("OpenAIChat.stream, per chunk", _us(adapted, chunks), "µs"))
    print_figure(Figure("added by the adapter, per chunk (paired runs)", per_chunk, "µs"))
    print_figure(Figure("the adapter's mapping alone, per chunk", _mapping_only(size, runs), "µs"))


def _us(stats: Stats, chunks: int) -> Stats:
    return Stats(tuple(v / chunks * 1e6 for v in stats.values))
