"""Unit tests of the rules engine (services/shared/rules) and its CLI commands."""
