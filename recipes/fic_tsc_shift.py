"""FIC-TSC under a controlled train/test shift: InceptionTime with and without the
Fisher-information constraint, trained on the unshifted training split and tested on rescaled,
offset and noised copies of the test split, with the paired Wilcoxon test per shift and how often
the constraint binds. No grid: the recipe is its study, e.g.::

    python recipes/fic_tsc_shift.py
    python recipes/fic_tsc_shift.py --studies.shift.seeds='[0, 1, 2, 3, 4]'
    python recipes/fic_tsc_shift.py --studies.shift.datasets='[GunPoint]' --studies.shift.epochs=60
"""

from lab import run_study_recipe


def main(args=None):
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
