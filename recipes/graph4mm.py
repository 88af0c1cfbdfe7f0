"""Graph4MM recipe (Ning, Fu, Wei, Xu & He, ICML 2025): a frozen small GPT-2 reads multimodal
digit graphs through an MM-QFormer's query tokens; Graph4MM (hop-diffused joint attention)
against the graph-agnostic Q-Former, the image-only Q-Former and the text-only LM, on generating
the neighbours' digit words and classifying the centre's digit. No grid: the recipe is its
study, e.g.::

    python recipes/graph4mm.py --studies.graph4mm.seeds='[0, 1, 2, 3, 4]'
    python recipes/graph4mm.py --studies.graph4mm.arms='{graph4mm: {variant: graph4mm,
        qformer: {hop: {alpha: 0.3}}}, text_only: {variant: text_only}}'
"""

from lab import run_study_recipe


def main(args=None):
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
