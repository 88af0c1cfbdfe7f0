"""Smoothed-information recipe: the plug-in estimators of the Fisher information and entropy of
Gaussian-smoothed densities against the truth as n grows, next to a KDE with Silverman's
bandwidth (the ``rates`` study, fitted log-log slopes against the parametric -1/2), and
``SmoothedInformationMonitor`` on an MLP trained on the digits (the ``monitor`` study). No grid:
the recipe is its studies, e.g.::

    python recipes/smoothed_information.py --studies.rates.seeds='[0, 1, 2]'
    python recipes/smoothed_information.py --studies.rates.dims='[1]' --studies.monitor=null
"""

from lab import run_study_recipe


def main(args=None):
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
