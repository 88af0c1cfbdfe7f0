"""placeholder: filled by the overlap command."""


def overlap() -> int:
    """Not yet built."""
    raise NotImplementedError
