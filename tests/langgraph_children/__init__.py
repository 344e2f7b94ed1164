"""Child processes of the LangGraph crash test."""
