"""store part of the runtime."""
