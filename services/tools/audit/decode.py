"""How the auditor reads stored JSON: the read side's readers
(:mod:`services.tools.history.from_store`)."""

from services.tools.history.from_store import read_json, read_state

__all__ = ["read_json", "read_state"]
