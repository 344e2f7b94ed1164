"""Testing helpers shipped with eventlog: the store conformance suite."""

from .conformance import StoreConformance, flip_a_letter

__all__ = ("StoreConformance", "flip_a_letter")
