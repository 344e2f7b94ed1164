"""The web app in headless Chromium (Debian's, driven by Playwright) over the crash tests'
databases: every view renders, the outcome-unknown call is drawn in its colour, a live session
updates as a real writer process commits, and no request leaves loopback. Screenshots go to a
temporary folder; their paths are printed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import anyio
import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Error,
    Page,
    Request,
    expect,
    sync_playwright,
)

from ..cli_fixtures import HeldOpen, build_runs_db, copy_db, play_failures, url_of
from .audit_support import CHROMIUM, CHROMIUM_ARGS, serving

pytestmark = pytest.mark.e2e

#: --outcome-unknown in the stylesheet, as the browser computes it.
OUTCOME_UNKNOWN_RGB = "rgb(194, 37, 92)"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = build_runs_db(tmp_path_factory.mktemp("browser") / "runs.db")
    anyio.run(play_failures, url_of(path))
    return path


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


class Watched:
    """A page whose every request and console error is recorded."""

    def __init__(self, browser: Browser) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.context.on("request", self._request)
        self.page: Page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", self._page_error)

    def _request(self, request: Request) -> None:
        self.requests.append(request.url)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"{message.text} ({message.location.get('url', '?')})")

    def _page_error(self, error: Error) -> None:
        self.errors.append(str(error))

    def shot(self, folder: Path, name: str) -> None:
        path = folder / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")

    def off_loopback(self) -> list[str]:
        return [u for u in self.requests if urlparse(u).hostname not in ("127.0.0.1",)]


def test_every_view_renders_and_stays_on_loopback(db: Path, browser: Browser, shots: Path) -> None:
    with serving(url_of(db)) as base:
        watched = Watched(browser)
        page = watched.page
        # The sessions list, and filtered by state.
        assert page.goto(base) is not None
        assert page.locator("#sessions tbody tr").count() == 6
        watched.shot(shots, "sessions")
        page.goto(base + "?state=needs+repair")
        assert page.locator("#sessions tbody tr").all_inner_texts()[0].startswith("crashed")
        # Each session's page: its timeline, calls, integrity and lineage sections.
        for sid in ("balanced", "crashed", "repaired", "open", "corrupt", "failures"):
            reply = page.goto(f"{base}s/{sid}")
            assert reply is not None and reply.status == 200, sid
            for section in ("#timeline", "#audit", "#integrity", "#lineage"):
                assert page.locator(section).is_visible(), (sid, section)
            watched.shot(shots, f"session-{sid}")
        # What the model saw, and the raw events, paged.
        page.goto(f"{base}s/failures/seen?at=16")
        assert page.locator(".msg.role-tool").count() == 4
        watched.shot(shots, "seen")
        page.goto(f"{base}s/balanced/events?limit=5")
        assert page.locator("table.events tbody tr").count() == 5
        page.click("a[rel=next]")
        assert page.locator("table.events tbody tr").first.inner_text().startswith("5")
        watched.shot(shots, "events")
        # No script error anywhere, and no request went anywhere but this server.
        assert watched.errors == []
        assert watched.off_loopback() == []
        assert all(u.startswith(base) for u in watched.requests)
        watched.context.close()


def test_the_outcome_unknown_call_is_drawn_in_its_colour(
    db: Path, browser: Browser, shots: Path
) -> None:
    with serving(url_of(db)) as base:
        watched = Watched(browser)
        page = watched.page
        page.goto(f"{base}s/repaired")
        bar = page.locator('.bar[data-kind="tool"][data-fate="outcome unknown"]')
        assert bar.count() == 1 and bar.is_visible()
        colour = bar.evaluate("e => getComputedStyle(e).backgroundColor")
        assert colour == OUTCOME_UNKNOWN_RGB
        # The legend says what that colour means, in the same colour.
        swatch = page.locator(".legend .swatch.fate-outcome-unknown")
        assert swatch.evaluate("e => getComputedStyle(e).backgroundColor") == colour
        # The call's row in the table, with the seqs that prove it.
        row = page.locator('tr.call[data-fate="outcome unknown"]')
        assert "call=10" in row.inner_text() and "result=11" in row.inner_text()
        bar.scroll_into_view_if_needed()
        watched.shot(shots, "outcome-unknown")
        assert watched.off_loopback() == []
        watched.context.close()


def test_a_live_session_updates_as_events_arrive(
    db: Path, browser: Browser, shots: Path, tmp_path: Path
) -> None:
    path = copy_db(db, tmp_path / "live.db")
    # A real writer process holds the finished session open, then commits a turn on cue.
    writer = HeldOpen(path, "balanced")
    try:
        with serving(url_of(path)) as base:
            watched = Watched(browser)
            page = watched.page
            page.goto(f"{base}s/balanced")
            assert page.locator("#state").inner_text() == "running"
            before = int(page.locator("#head").inner_text())
            # Waited on with Playwright's own matchers: a string predicate would be eval'd in
            # the page, which its Content-Security-Policy forbids (as it should).
            expect(page.locator("#live-status")).to_have_text("live")
            # The writer commits a turn (five events); the page shows it without a reload.
            writer.commit_turn()
            expect(page.locator("#live-log li[data-seq]")).to_have_count(5)
            expect(page.locator("#head")).to_have_text(str(before + 5))
            assert "turn/end" in page.locator("#live-log").inner_text()
            watched.shot(shots, "live")
            assert watched.errors == []
            assert watched.off_loopback() == []
            watched.context.close()
    finally:
        writer.close()
