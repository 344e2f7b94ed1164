"""Child processes and helpers of the pydantic-ai tests."""
