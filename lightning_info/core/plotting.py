"""matplotlib, imported lazily with a non-interactive backend (plots are saved or logged)."""

from __future__ import annotations

from lightning_info.core.optional import require_extra


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend; an ImportError names the extra to install."""
    require_extra("matplotlib", "plots", "Plots").use("Agg")
    return require_extra("matplotlib.pyplot", "plots", "Plots")
