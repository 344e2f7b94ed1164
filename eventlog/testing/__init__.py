"""Testing helpers shipped with eventlog: the store conformance suite, run with pytest (the
``testing`` extra installs pytest and hypothesis)."""

from .._extras import needs_extra as _needs_extra

with _needs_extra("testing", "eventlog.testing", "pytest", "hypothesis"):
    from ._conformance import StoreConformance
    from ._helpers import flip_a_letter, lease_refusals

__all__ = ("StoreConformance", "flip_a_letter", "lease_refusals")
