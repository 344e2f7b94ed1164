"""The PostgreSQL backend: ``postgresql://...``, sessions in tables driven with asyncpg.

Needs the ``postgres`` extra. The statements, leases, notifications and error translation live
in this package's private modules. See docs/stores.md.
"""

from ._backend import PostgresBackend

__all__ = ("PostgresBackend",)
