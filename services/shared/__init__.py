"""The libraries the services share (with ``contracts`` at the top level): ``rules``, the pure
game, and ``platform``, the runtime every service runs on (store, outbox relay, consumer,
signatures, settings)."""
