"""The builtin agent: deterministic, no LLM. Work in progress."""
