"""Last-iterate recipe: the virtual-transition OMD learner of Zhao et al. (ICML 2025) against
IX-OMD and Balanced OMD under bandit feedback on Kuhn (2M episodes) and Leduc poker (10M),
NashConv of the last iterate against episodes, every method tuned over the same number of
settings, with OpenSpiel's CFR (full feedback) as a reference line. No grid: the recipe is its
study, e.g.::

    python recipes/efg_last_iterate.py --studies.games.games='[kuhn_poker]'
    python recipes/efg_last_iterate.py --studies.games.games='[liars_dice]' \
        --studies.games.episodes='{liars_dice: 1000000}' --studies.games.batch_size=256 \
        --studies.games.cfr_iterations='{}'

The longer run: Leduc's 10M episodes in batches of 256 instead of 1024 (four times the updates;
14 min on 2 CPU cores, tuning included)::

    python recipes/efg_last_iterate.py --studies.games.games='[leduc_poker]' \
        --studies.games.batch_size='{leduc_poker: 256}'
"""

from lab import run_study_recipe


def main(args=None):
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
