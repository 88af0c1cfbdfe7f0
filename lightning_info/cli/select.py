"""``lightning-info select``: a FisherSFT selection from a pool file.

The pool is a JSON-lines file, one JSON object (a record) per non-blank line. Its features come
either from a causal LM saved in a local folder (the last-layer hidden states at the text's tokens,
embedded as :class:`~lightning_info.methods.fisher_sft.FisherSubsetDataModule` embeds its pool) or
from a ``.npy`` file of precomputed features, one row (or block of token rows) per record. The
greedy maximises FisherSFT's information gain
(:func:`~lightning_info.methods.fisher_sft.functional.fisher_greedy_select`); with ``two_round``
it runs GreeDi over shards of a feature store on disk, serially or on Dask.

A record's text is read as :mod:`lightning_info.cli.records` reads it for every command. The
module imports only the standard library until a command runs: the entry point imports every
command's module to list them.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

from lightning_info.cli import BadInput
from lightning_info.cli.records import (
    RecordText,
    load_model,
    model_folder,
    model_positions,
    output_folder,
    read_records,
)

SELECTED_RECORDS = "selected.jsonl"
"""The selected records, one per line, in the order chosen."""
SELECTION_FILE = "selection.json"
"""The selection: indices, gains, ``F(S)``, fingerprint, metadata (``save_selection``'s format)."""


# -- the command -----------------------------------------------------------------------------


def select(
    pool: str,
    output_dir: str,
    budget: int,
    model: str | None = None,
    features: str | None = None,
    text_field: str | None = None,
    fields: list[str] | None = None,
    template: str | None = None,
    prompt_template: str | None = None,
    chat_template: bool = False,
    lam: float = 1.0,
    pooling: Literal["none", "mean", "sum"] = "none",
    token_weighting: Literal["none", "p(1-p)"] = "none",
    sketch_dim: int | None = None,
    seed: int = 0,
    two_round: bool = False,
    shards: int = 8,
    dask: bool = False,
    scheduler: str | None = None,
    batch_size: int = 16,
    max_length: int | None = None,
    device: str | None = None,
    progress: bool = True,
) -> int:
    """Select ``budget`` records of a pool by FisherSFT's information gain.

    Writes, each atomically, ``<output_dir>/selected.jsonl`` (the selected records, in the order
    chosen) and ``<output_dir>/selection.json`` (indices, gains, F(S) and the selection's
    fingerprint, in the format ``SubsetSelectionOptions.path`` reads: with a model, a
    ``FisherSubsetDataModule`` given the same pool, model and options reuses it instead of
    selecting again). Every input is checked before anything is written.

    Args:
        pool: a JSON-lines file, one JSON object (a record) per non-blank line.
        output_dir: the folder (created if absent) that receives ``selected.jsonl``, the
            selected records in the order chosen, and ``selection.json``: indices, gains, F(S)
            and the selection's fingerprint.
        budget: how many records to select, from 1 to the pool's size.
        model: a local folder written by save_pretrained (a causal LM and its tokenizer): the
            pool is embedded with it, each record's text by the last-layer hidden states at
            its tokens (after its prompt, as FisherSubsetDataModule embeds responses). Give this
            or ``features``.
        features: a .npy file of precomputed features, aligned with the pool's records: shape
            (records, d) for one row per record, or (records, tokens, d) for token blocks.
        text_field: the field holding the text embedded with ``model`` (default ``text``).
        fields: several fields, joined with a newline, form the text.
        template: a template of named fields forms the text, e.g. ``"{prompt}\\n{response}"``
            in a YAML config.
        prompt_template: a template of named fields forming the prompt the text follows (its
            tokens condition the text's but are not embedded), e.g. ``"{instruction}"``; none:
            the text is embedded on its own.
        chat_template: render prompt and text with the tokenizer's chat template.
        lam: the ridge lambda > 0 of the objective log det(lambda I + sum X_i^T X_i).
        pooling: ``none`` (every token row counts), ``mean`` or ``sum`` (one row per record).
        token_weighting: ``p(1-p)`` weighs each token row by the model's next-token curvature
            (needs ``model``); ``none`` weighs all alike.
        sketch_dim: project the features to this many columns (a seeded Gaussian sketch) before
            selecting; none keeps their width.
        seed: the sketch's seed (the greedy itself draws nothing).
        two_round: select by GreeDi: greedy on each of ``shards`` contiguous shards of a feature
            store written under ``output_dir`` (removed afterwards), then greedy over their picks.
        shards: the shards of the two-round selection.
        dask: run the two rounds on Dask (implies ``two_round``; needs
            ``pip install 'lightning-info[audit]'``).
        scheduler: the address of a running Dask scheduler (``tcp://host:8786``), whose workers
            must read ``output_dir``; none starts a local cluster in this process.
        batch_size: records per forward pass when embedding.
        max_length: tokens per prompt + text when embedding (longer texts lose their end);
            none: the model's positions, at most 256.
        device: where the model runs (``cpu``, ``cuda``, ``cuda:1``); none: a GPU if present.
        progress: show a progress bar while embedding.
    """
    pool_path = Path(pool)
    folder = output_folder(output_dir)
    records = read_records(pool_path, "pool")
    settings = _settings(budget, len(records), pool_path, lam, pooling, token_weighting)
    settings |= _integers(sketch_dim=sketch_dim, seed=seed, shards=shards)
    settings["two_round"] = bool(two_round or dask)
    embedding = _integers(batch_size=batch_size, max_length=max_length)
    embedding |= {"chat_template": bool(chat_template), "progress": bool(progress)}
    if (model is None) == (features is None):
        raise BadInput("give either model (a model folder) or features (a .npy file), not both.")
    if scheduler is not None and not dask:
        raise BadInput("scheduler is the address of a Dask cluster: give it with dask=true.")
    if features is not None:
        if token_weighting != "none":
            raise BadInput(
                "token_weighting p(1-p) needs the model's next-token probabilities: give model "
                "instead of features, or weigh the rows of the features yourself."
            )
        if prompt_template is not None or chat_template:
            raise BadInput("prompt_template and chat_template shape the embedding: give model.")
        array = _read_features(Path(features), len(records), pool_path)
        source = {"features": str(features)}
        run = functools.partial(_select_features, array, settings, folder)
    else:
        text = RecordText.from_options(text_field, fields, template, prompt_template)
        model_path = model_folder(model, "model")
        prompts, texts = text.read(records, pool_path)
        lm, tokenizer = load_model(model_path, "model", device)
        embedding["max_length"] = _check_model(lm, tokenizer, max_length)
        if prompt_template is not None:
            _check_prompts(tokenizer, prompts, embedding, records, pool_path)
        source = {"model": str(model)}
        pool_texts = (prompts, texts, records, pool_path)
        run = functools.partial(
            _select_model, lm, tokenizer, pool_texts, settings, embedding, folder
        )
    client = _dask_client(scheduler) if dask else None
    try:
        selection, fingerprint = run(client)
    finally:
        if client is not None:
            _close(client)
    _write(selection, fingerprint, records, settings, source, pool_path, folder)
    _summary(selection, fingerprint, records, pool_path, folder, source)
    return 0


def _settings(budget, size, pool_path, lam, pooling, token_weighting) -> dict[str, Any]:
    """The selection's options, checked against the pool's ``size``."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise BadInput(f"budget must be an integer >= 1, got {budget!r}.")
    if budget > size:
        raise BadInput(
            f"budget={budget} is larger than the pool ({size} records in {pool_path}); lower it."
        )
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not 0 < lam < math.inf:
        raise BadInput(f"lam must be a finite number > 0, got {lam!r}.")
    if pooling not in ("none", "mean", "sum"):
        raise BadInput(f"pooling must be none, mean or sum, got {pooling!r}.")
    if token_weighting not in ("none", "p(1-p)"):
        raise BadInput(f"token_weighting must be none or p(1-p), got {token_weighting!r}.")
    return {
        "budget": budget,
        "lam": float(lam),
        "pooling": pooling,
        "token_weighting": token_weighting,
    }


_MINIMUM = {"sketch_dim": 1, "seed": 0, "shards": 1, "batch_size": 1, "max_length": 2}
_OPTIONAL = ("sketch_dim", "max_length")


def _integers(**values: int | None) -> dict[str, int | None]:
    """``values``, each an integer at or above its minimum (``sketch_dim`` and ``max_length``
    may be None)."""
    for name, value in values.items():
        if value is None and name in _OPTIONAL:
            continue
        low = _MINIMUM[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise BadInput(f"{name} must be an integer >= {low}, got {value!r}.")
    return values


def _read_features(path: Path, size: int, pool_path: Path) -> Any:
    """The features file, checked against the pool: a float array of one row (or block) per
    record, finite."""
    import numpy as np

    if not path.is_file():
        reason = "is a folder" if path.is_dir() else "does not exist"
        raise BadInput(f"{path}: the features file {reason}; give a .npy file.")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as err:
        raise BadInput(
            f"{path}: not a .npy array of numbers ({err}); save it with np.save."
        ) from None
    if not isinstance(array, np.ndarray) or array.ndim not in (2, 3):
        shape = getattr(array, "shape", None)
        raise BadInput(
            f"{path}: features of shape {shape}; give (records, d) or (records, tokens, d)."
        )
    if array.dtype.kind not in "fiu":
        raise BadInput(f"{path}: features of dtype {array.dtype}; give real numbers.")
    if array.shape[0] != size:
        raise BadInput(
            f"{path} holds {array.shape[0]} rows of features but {pool_path} holds {size} "
            "records; give one row per record, in the pool's order."
        )
    if 0 in array.shape[1:]:
        raise BadInput(f"{path}: features of shape {array.shape} have no values per record.")
    if not np.isfinite(array).all():
        row = int(np.argwhere(~np.isfinite(array.reshape(size, -1)))[0, 0])
        raise BadInput(f"{path}: the features of record {row} (0-based) hold NaN or inf.")
    return array


def _check_model(model: Any, tokenizer: Any, max_length: int | None) -> int:
    """``max_length``, or the model's positions up to 256 for ``None``; refuses a tokenizer that
    cannot pad and ``max_length`` beyond the model's positions."""
    if tokenizer.pad_token_id is None and tokenizer.eos_token_id is None:
        raise BadInput("the model's tokenizer has neither a pad nor an eos token to pad with.")
    positions = model_positions(model)
    if max_length is None:
        return min(256, positions or 256)
    if positions is not None and max_length > positions:
        raise BadInput(
            f"max_length={max_length} is more than the model's {positions} positions; lower it."
        )
    return max_length


def _check_prompts(tokenizer, prompts, embedding, records, pool_path) -> None:
    """Refuse a prompt that leaves its text no token within ``max_length``, naming the line
    (as FisherSubsetDataModule encodes it: the prompt and a newline)."""
    if embedding["chat_template"]:
        return
    max_length = embedding["max_length"]
    for prompt, (line, _) in zip(prompts, records):
        if len(tokenizer(prompt + "\n", add_special_tokens=True)["input_ids"]) >= max_length:
            raise BadInput(
                f"{pool_path}, line {line}: the prompt takes max_length={max_length} tokens or "
                "more, leaving the text none; raise max_length or shorten the prompt."
            )


def _blocks(array: Any) -> Any:
    """A features array as TokenBlocks: one row per record, or its token rows."""
    import numpy as np
    import torch

    from lightning_info.core.blocks import TokenBlocks

    values = torch.from_numpy(np.array(array))  # read into memory, writable
    if not values.is_floating_point():
        values = values.double()
    rows = 1 if values.dim() == 2 else values.shape[1]
    offsets = torch.arange(values.shape[0] + 1, dtype=torch.long) * rows
    return TokenBlocks(values.reshape(-1, values.shape[-1]), offsets)


def _sketch(settings: dict[str, Any]) -> Any:
    from lightning_info.methods.fisher_sft.functional import FeatureSketch

    if settings["sketch_dim"] is None:
        return None
    return FeatureSketch(settings["sketch_dim"], settings["seed"])


def _sketch_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The sketch's part of a selection's metadata and fingerprint (as the data module keeps)."""
    if settings["sketch_dim"] is None:
        return {"sketch_dim": None}
    return {"sketch_dim": settings["sketch_dim"], "sketch_seed": settings["seed"]}


def features_fingerprint(blocks: Any, settings: dict[str, Any]) -> str:
    """The fingerprint of a selection from precomputed features: ``selection_fingerprint`` of
    the features (before any sketch) and the options the selection depends on."""
    from lightning_info.methods.fisher_sft.sampler import (
        selection_fingerprint,
    )

    return selection_fingerprint(
        blocks,
        budget=settings["budget"],
        strategy="fisher",
        seed=None,
        lam=settings["lam"],
        pooling=settings["pooling"],
        token_weighting="none",
        **_sketch_settings(settings),
        two_round=settings["two_round"],
        store_shards=settings["shards"] if settings["two_round"] else None,
    )


def _select_features(array, settings, folder, client):
    from lightning_info.methods.fisher_sft.functional import fisher_greedy_select, sketch_features

    blocks = _blocks(array)
    fingerprint = features_fingerprint(blocks, settings)
    sketch = _sketch(settings)
    held = blocks if sketch is None else sketch_features(blocks, sketch)
    if settings["two_round"]:
        fill = functools.partial(_append, held)
        return _two_round(fill, sketch, False, settings, folder, client), fingerprint
    selection = fisher_greedy_select(
        held, settings["budget"], lam=settings["lam"], pooling=settings["pooling"]
    )
    return selection, fingerprint


def _append(blocks: Any, store: Any) -> None:
    store.append(blocks)


def _select_model(model, tokenizer, pool_texts, settings, embedding, folder, client):
    """Embed the pool as FisherSubsetDataModule does (all at once, or batch by batch into a
    feature store for the two-round selection) and select."""
    from lightning_info.lm.features import response_features
    from lightning_info.methods.fisher_sft.functional import fisher_greedy_select

    prompts, texts, records, pool_path = pool_texts
    weighted = settings["token_weighting"] != "none"
    sketch = _sketch(settings)
    fingerprint = model_fingerprint(model, tokenizer, prompts, texts, settings, embedding)

    def embed(rows: slice, progress: bool) -> Any:
        try:
            return response_features(
                model,
                tokenizer,
                {"prompt": prompts[rows], "response": texts[rows]},
                batch_size=embedding["batch_size"],
                max_length=embedding["max_length"],
                chat_template=embedding["chat_template"],
                progress=progress,
                curvature_weights=weighted,
                project=sketch,
            )
        except (TypeError, ValueError) as err:
            raise BadInput(_name_row(str(err), records[rows], pool_path)) from None

    if settings["two_round"]:

        def fill(store: Any) -> None:
            from tqdm.auto import tqdm

            step = embedding["batch_size"]
            with tqdm(
                total=len(texts),
                desc="features to disk",
                unit="record",
                disable=not embedding["progress"],
            ) as bar:
                for start in range(0, len(texts), step):
                    embedded = embed(slice(start, start + step), False)
                    store.append(*(embedded if weighted else (embedded,)))
                    bar.update(min(step, len(texts) - start))

        return _two_round(fill, sketch, weighted, settings, folder, client), fingerprint
    embedded = embed(slice(None), embedding["progress"])
    held, weights = embedded if weighted else (embedded, None)
    selection = fisher_greedy_select(
        held,
        settings["budget"],
        lam=settings["lam"],
        pooling=settings["pooling"],
        token_weights=weights,
    )
    return selection, fingerprint


def _name_row(message: str, records: list[tuple[int, Any]], pool_path: Path) -> str:
    """An embedding error's ``Row i`` as the pool file's line."""
    match = re.match(r"Row (\d+): ", message)
    if match and int(match.group(1)) < len(records):
        line = records[int(match.group(1))][0]
        return f"{pool_path}, line {line}: {message[match.end() :]}"
    return f"{pool_path}: {message}"


def model_fingerprint(model, tokenizer, prompts, texts, settings, embedding) -> str:
    """The fingerprint FisherSubsetDataModule gives the same selection (one process, strategy
    ``fisher``; with ``two_round``, a ``feature_dir`` and ``store_shards=shards``): the prompts
    and texts, the options, the tokenizer's vocabulary and the model's class, configuration and
    embedding shape."""
    from lightning_info.methods.fisher_sft.sampler import (
        describe_model,
        describe_tokenizer,
        selection_fingerprint,
    )

    two_round = settings["two_round"]
    return selection_fingerprint(
        (list(prompts), list(texts)),
        budget=settings["budget"],
        strategy="fisher",
        seed=None,
        lam=settings["lam"],
        pooling=settings["pooling"],
        token_weighting=settings["token_weighting"],
        **_sketch_settings(settings),
        max_length=embedding["max_length"],
        chat_template=embedding["chat_template"],
        tokenizer=describe_tokenizer(tokenizer),
        feature_model=describe_model(model),
        two_round=two_round,
        world_size=1,
        store_shards=settings["shards"] if two_round else None,
    )


def _two_round(fill, sketch, weighted, settings, folder, client) -> Any:
    """GreeDi over ``shards`` contiguous shards of a feature store that ``fill`` writes in a
    temporary folder under ``folder``: serially, or on Dask with ``client``."""
    from lightning_info.methods.fisher_sft.dask_select import (
        dask_two_round_select,
        store_two_round_select,
    )
    from lightning_info.methods.fisher_sft.feature_store import FeatureStore

    folder.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".features-", dir=folder)).resolve()
    try:
        store = FeatureStore.create(scratch, sketch=sketch, weighted=weighted, overwrite=True)
        fill(store)
        options = {"lam": settings["lam"], "pooling": settings["pooling"]}
        budget, shards = settings["budget"], settings["shards"]
        if client is None:
            return store_two_round_select(store, budget, shards, **options)
        return dask_two_round_select(str(scratch), budget, shards, client, **options)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _dask_client(scheduler: str | None) -> Any:
    """A ``distributed.Client``: of the scheduler at ``scheduler``, or of a local cluster in
    this process (one worker, a thread per core)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise BadInput(
            "dask=true needs Dask's distributed scheduler; install it with "
            "pip install 'lightning-info[audit]'."
        ) from None
    if scheduler is not None:
        try:
            return Client(scheduler, timeout="20s")
        except (OSError, TimeoutError, ValueError) as err:
            raise BadInput(f"cannot reach the Dask scheduler at {scheduler!r} ({err}).") from None
    cluster = LocalCluster(
        n_workers=1,
        threads_per_worker=os.cpu_count() or 1,
        processes=False,
        dashboard_address=None,
    )
    return Client(cluster)


def _close(client: Any) -> None:
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def _write(selection, fingerprint, records, settings, source, pool_path, folder) -> None:
    """The selected records and the selection file, each written atomically."""
    from lightning_info.core.files import atomic_write_text
    from lightning_info.methods.fisher_sft.sampler import save_selection

    folder.mkdir(parents=True, exist_ok=True)
    chosen = [records[i] for i in selection.indices]
    atomic_write_text(
        folder / SELECTED_RECORDS,
        "".join(json.dumps(record, ensure_ascii=False) + "\n" for _, record in chosen),
    )
    # the keys FisherSubsetDataModule checks when it reloads a selection, then what it came from
    metadata = {
        "pool_size": len(records),
        "budget": settings["budget"],
        "strategy": "fisher",
        "token_weighting": settings["token_weighting"],
        **_sketch_settings(settings),
        "pool": str(pool_path),
        "lines": [line for line, _ in chosen],
        **source,
        "lam": settings["lam"],
        "pooling": settings["pooling"],
        "two_round": settings["two_round"],
        "shards": settings["shards"] if settings["two_round"] else None,
    }
    save_selection(selection, folder / SELECTION_FILE, fingerprint=fingerprint, **metadata)


def _summary(selection, fingerprint, records, pool_path, folder, source) -> None:
    ((kind, where),) = source.items()
    print(
        f"FisherSFT selected {len(selection.indices)} of {len(records)} records of {pool_path} "
        f"({kind}: {where})"
    )
    gains = selection.gains
    first = f"; gains {gains[0]:.4f} (first) to {gains[-1]:.4f} (last)" if gains else ""
    print(f"F(S) = {selection.objective:.4f}{first}")
    print(f"fingerprint {fingerprint}")
    print(f"wrote {folder / SELECTED_RECORDS} and {folder / SELECTION_FILE}")
