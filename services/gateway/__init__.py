"""The operator gateway: an HTTP API for casino platforms, seamless-wallet money movement,
reconciliation (``docs/integrating.md``)."""
