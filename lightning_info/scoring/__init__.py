"""The post-hoc scoring API shared by the confidence and OOD-shaping methods: a scorer fitted on a
trained classifier's penultimate features and logits (:class:`PosthocScorer`), the hook that
collects them (:func:`collect_outputs`) and the end-of-fit report Callback base
(:class:`PosthocReport`)."""

from lightning_info.scoring.base import PosthocScorer, check_outputs
from lightning_info.scoring.report import PosthocReport, collect_outputs

__all__ = ["PosthocReport", "PosthocScorer", "check_outputs", "collect_outputs"]
