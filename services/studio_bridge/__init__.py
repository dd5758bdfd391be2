"""The device bridge of a studio table (``punto-banco serve studio-bridge``): docs/studio.md."""
