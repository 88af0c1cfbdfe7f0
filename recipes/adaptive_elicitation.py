"""Adaptive elicitation recipe (Wang, Zollo, Zemel & Namkoong, ICML 2025): a small GPT-2
meta-trained on entities' shuffled question/answer blocks chooses questions by expected
information gain, lookahead, answer entropy or at random; target accuracy and NLL against the
number of questions asked, on the latent-type world (with the exact posterior as the upper
reference) and on scikit-learn's digits. No grid: the recipe is its study, e.g.::

    python recipes/adaptive_elicitation.py --studies.elicitation.worlds='[latent]'
    python recipes/adaptive_elicitation.py --studies.elicitation.seeds='[0, 1, 2, 3, 4]'
"""

from lab import run_study_recipe


def main(args=None):
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
