"""Second-tier tests (``pytest -m e2e``): real browsers, real trace receivers, real servers."""
