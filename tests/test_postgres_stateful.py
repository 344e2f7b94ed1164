"""The stateful machine (docs/stores.md) on the real PostgreSQL server, the memory store as model.

Each hypothesis example works in a schema of its own, dropped when the example ends.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import settings

from eventlog import open_store
from eventlog.testing._stateful import Storage, store_machine
from tests.conftest import SOAK
from tests.pg_children.server import drop_schema, raw_connection, require_server, store_url

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _server() -> Iterator[None]:
    require_server()
    yield


async def _sql(statement: str) -> None:
    conn = await raw_connection()
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def postgres_storage() -> Storage:
    schema = f"m_{os.getpid()}_{uuid.uuid4().hex[:10]}"

    async def process_died() -> None:
        # What another host finds once a killed host's leases have run out.
        await _sql(
            f'UPDATE "{schema}".sessions SET lease_until = clock_timestamp() '
            "WHERE writer IS NOT NULL"
        )

    def cleanup() -> None:
        asyncio.run(drop_schema(schema))

    return Storage(
        make_store=lambda **options: open_store(store_url(schema), **options),
        process_died=process_died,
        cleanup=cleanup,
    )


TestPostgresAgainstModel = store_machine(postgres_storage).TestCase
# Every example starts and stops stores on a server (~0.1 s each, plus a schema): fewer
# examples than the SQLite machine in the default run, the profile's full count in a soak.
TestPostgresAgainstModel.settings = settings(
    TestPostgresAgainstModel.settings,
    stateful_step_count=25,
    max_examples=settings().max_examples if SOAK else 20,
)
