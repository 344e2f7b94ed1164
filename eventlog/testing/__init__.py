"""Testing helpers shipped with eventlog: the store conformance suite."""

from ._conformance import StoreConformance, flip_a_letter, lease_refusals

__all__ = ("StoreConformance", "flip_a_letter", "lease_refusals")
