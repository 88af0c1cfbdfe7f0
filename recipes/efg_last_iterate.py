"""Last-iterate recipe: the virtual-transition OMD learner of Zhao et al. (ICML 2025) against
IX-OMD and Balanced OMD under bandit feedback on Kuhn and Leduc poker, NashConv of the last
iterate against episodes, with OpenSpiel's CFR (full feedback) as a reference line. No grid:
the recipe is its study, e.g.::

    python recipes/efg_last_iterate.py --studies.games.games='[kuhn_poker]'
    python recipes/efg_last_iterate.py --studies.games.games='[liars_dice]' \
        --studies.games.episodes='{liars_dice: 1000000}' --studies.games.cfr_iterations='{}'
"""

from lightning_info.experiments import run_study_recipe


def main(args=None):
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
