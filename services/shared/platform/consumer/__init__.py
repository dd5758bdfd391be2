"""consumer part of the runtime."""
