"""relay part of the runtime."""
