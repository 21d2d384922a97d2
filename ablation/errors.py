"""The one exception type the CLI turns into a one-line message and exit code 2."""


def one_line(text: str, limit: int | None = None) -> str:
    """A message as one printable line: control characters (a newline in a file name, a model id)
    escaped, so a message can never forge a second line; overlong text cut at `limit`."""
    text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


class AblationError(Exception):
    """A user-facing error: the message names the file/field and what to do. Always one line."""

    def __init__(self, message: str = "", *args):
        super().__init__(one_line(str(message)), *args)
