"""Child-process scripts for the SQLite multi-process tests (run by path)."""
