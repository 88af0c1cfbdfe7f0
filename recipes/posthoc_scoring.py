"""Post-hoc scoring recipe: confidence (MSP, temperature, PMI, PVI, PSI) and OOD shaping, over
seeds.

For each seed an MLP is trained on sklearn's bundled digits 0-4; the ``failure`` study attaches
``PosthocScoring`` (every confidence scorer fitted on the validation split, the failure-prediction
table on the test split) and the ``ood`` study ``OODShapingReport`` (energy, ReAct, VRA, PLF; OOD =
digits 5-9, noise, pixel-shuffled digits). Every cell is mean ± std over the seeds. No grid: the
recipe is its studies, e.g.::

    python recipes/posthoc_scoring.py --studies.failure.seeds='[0, 1, 2, 3, 4]'
    python recipes/posthoc_scoring.py --studies.ood.tune_trials=50 --studies.failure=null
"""

from lab import run_study_recipe


def main(args=None):
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
