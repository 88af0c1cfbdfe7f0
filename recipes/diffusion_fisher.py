"""Diffusion-Fisher recipe: per seed, a small diffusion model on a 2-D ring mixture, then
likelihoods by the PF-ODE with the diffusion-Fisher trace vs Hutchinson (error and time) and the
OT check (the ``likelihoods`` study; every cell mean ± std over the seeds). No grid: the recipe is
its study, e.g.::

    python recipes/diffusion_fisher.py --studies.likelihoods.max_steps=500
    python recipes/diffusion_fisher.py --studies.likelihoods.seeds='[0, 1, 2, 3, 4]'
"""

from lab import run_study_recipe


def main(args=None):
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
