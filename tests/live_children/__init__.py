"""Child processes that write a session while the parent reads it (tests/test_live_readers.py)."""
