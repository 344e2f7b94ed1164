"""The read-only web app of ``eventlog serve`` and the self-contained HTML of
``eventlog export --format html``: sessions, each run's timeline with bars coloured by fate,
its tool calls with the seqs that prove them, what the model saw, raw events, integrity and
lineage. Needs the ``web`` extra (Starlette, Jinja2, uvicorn, sse-starlette)."""

from eventlog import needs_extra as _needs_extra

with _needs_extra("web", "agent.web", "starlette", "jinja2", "uvicorn", "sse_starlette"):
    from ._app import create_app as create_app
from ._render import ExportedPage as ExportedPage
from ._render import export_html as export_html

__all__ = ("ExportedPage", "create_app", "export_html")
