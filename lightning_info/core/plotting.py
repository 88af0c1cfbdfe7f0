"""matplotlib, imported lazily with a non-interactive backend (plots are saved or logged)."""

from __future__ import annotations


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend; an ImportError names the extra to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError("Plots need matplotlib: pip install 'lightning-info[plots]'") from err
    return plt
