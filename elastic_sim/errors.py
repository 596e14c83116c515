"""Errors of the face: bad input names the file, the field path and what was expected."""

from __future__ import annotations


class ScenarioError(Exception):
    """A scenario (or command line) that cannot be run; exit code 2."""

    def __init__(self, file: str, path: str, message: str) -> None:
        self.file = file
        self.path = path
        self.message = message
        where = f"{file}: {path}: " if path else f"{file}: "
        super().__init__(where + message)
