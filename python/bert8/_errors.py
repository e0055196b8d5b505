"""bert8's exception and status codes (the bert8_status enum of include/bert8.h)."""
from __future__ import annotations

import enum


class Status(enum.IntEnum):
    """The C library's status codes (bert8_status)."""

    OK = 0
    INVALID_ARG = 1
    IO = 2
    FORMAT = 3
    UNSUPPORTED = 4
    SHAPE = 5
    MISSING = 6
    NOMEM = 7
    TOO_LARGE = 8
    ENCODING = 9
    INTERNAL = 10


class Error(Exception):
    """A failure reported by the bert8 C library.

    Attributes:
        message: the library's message (names the file, tensor, field or byte offset at fault).
        status: the status code, a :class:`Status`.
        status_name: the library's name for the status ("invalid argument", "I/O error", ...).
    """

    def __init__(self, message: str, status: int = Status.INTERNAL, status_name: str = "") -> None:
        super().__init__(message, status, status_name)
        self.message = message
        try:
            self.status: Status | int = Status(status)
        except ValueError:
            self.status = status
        self.status_name = status_name

    def __str__(self) -> str:
        return f"{self.message} [{self.status_name}]" if self.status_name else self.message
