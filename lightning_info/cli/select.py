"""placeholder: filled by the select command."""


def select() -> int:
    """Not yet built."""
    raise NotImplementedError
