"""The one exception type the CLI turns into a one-line message and exit code 2."""


class AblationError(Exception):
    """A user-facing error: the message names the file/field and what to do."""
