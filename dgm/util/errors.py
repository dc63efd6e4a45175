"""Errors that reach the user as one clear message, never as a traceback."""


class UserFacingError(Exception):
    """Says what went wrong and what to do about it."""
