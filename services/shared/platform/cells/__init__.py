"""cells part of the runtime."""
