"""Unit tests of the rules engine (services/rules) and its CLI commands."""
