"""host part of the runtime."""
