"""The PostgreSQL backend: ``postgresql://...``, sessions in tables driven with asyncpg.

Needs the ``postgres`` extra. The statements, leases, notifications and error translation live
in this package's private modules. See docs/stores.md.
"""

from ._backend import PostgresBackend
from ._peek import SchemaFound, drop_created, holds_store

__all__ = ("PostgresBackend", "SchemaFound", "drop_created", "holds_store")
