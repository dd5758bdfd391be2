"""security part of the runtime."""
