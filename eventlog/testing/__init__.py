"""Testing helpers shipped with eventlog: the store conformance suite."""

from .conformance import StoreConformance

__all__ = ("StoreConformance",)
