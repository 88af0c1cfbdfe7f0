"""DocKS-RAG recipe: the hybrid prompt's ablation (plain document, + DocKG, + SetRAG, both) for
document-level relation extraction, official F1 / Ign F1 over seeds. No grid: the recipe is its
study, e.g.::

    python recipes/docks_rag.py --studies.docred.seeds='[0]'
    python recipes/docks_rag.py --studies.docred.model=meta-llama/Meta-Llama-3-8B \
        --studies.docred.lora='{r: 16, lora_alpha: 32}' --studies.docred.lr=5e-5 \
        --studies.docred.data='{source: {train_file: train_annotated.json, dev_file: dev.json,
        rel_info_file: rel_info.json}}'
"""

from lightning_info.experiments import run_study_recipe


def main(args=None):
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
