"""Ancestral-graph recipe: the search-and-score of Lagrange & Isambert (ICML 2025) against
causal-learn's FCI on pgmpy's Alarm and Insurance networks with 0 / 10 / 20% hidden nodes, and
the method note's toy graphs as N grows. No grid: the recipe is its study, e.g.::

    python recipes/ancestral_search.py --studies.search.sample_sizes='[1000, 5000, 20000]'
    python recipes/ancestral_search.py --studies.search.method=bic --studies.search.workers=1
"""

from lab import run_study_recipe


def main(args=None):
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
