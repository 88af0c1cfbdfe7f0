"""DocKS-RAG recipe: the hybrid prompt's ablation for document-level relation extraction (by
default + DocKG against the hybrid prompt; also the plain document and + SetRAG), official F1 /
Ign F1 over seeds. No grid: the recipe is its study, e.g.::

    python recipes/docks_rag.py --studies.docred.seeds='[0]'
    python recipes/docks_rag.py --studies.docred.variants='[plain, set_rag]'
    python recipes/docks_rag.py --config recipes/docks_rag_gpu.yaml \
        --studies.docred.model=/path/to/Meta-Llama-3-8B \
        --studies.docred.data='{source: {train_file: train_annotated.json, dev_file: dev.json,
        rel_info_file: rel_info.json}}'
"""

from lab import run_study_recipe


def main(args=None):
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
