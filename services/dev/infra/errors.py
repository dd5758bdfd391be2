"""The one error type of the infra package: what went wrong and what to do about it."""

from __future__ import annotations


class InfraError(Exception):
    """A problem a person can fix; the CLI prints it without a stack trace.

    ``problem`` says what is wrong, ``fix`` what to do about it.
    """

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}\n  what to do: {fix}" if fix else problem)
