"""placeholder: filled by the audit command."""


def audit() -> int:
    """Not yet built."""
    raise NotImplementedError
