"""Child processes and helpers of the OpenAI Agents SDK tests."""
