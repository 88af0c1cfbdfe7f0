"""The SFT pipeline at toy size: the planted corpus, every stage attached and logging, the recipe's
arms on a local model and local data sets, a mid-epoch resume, and two DDP processes."""

from __future__ import annotations

import csv
import json
import math
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from lightning.pytorch import Callback
from sklearn.metrics import roc_auc_score

from lab.sft_corpus import write_planted_sft_corpus
from lightning_info import FisherConstraint, FragmentExtractionAudit, TrainTestOverlap
from lightning_info.core.logging import METRIC_NAME, metric_key
from lightning_info.methods.fisher_sft import Selection
from lightning_info.methods.prism.auditor import ATTACKS
from lightning_info.methods.prism.fragments import AttackSet
from lightning_info.pipelines import SFTPipelineReport
from lightning_info.pipelines.sft import AUDIT_FIGURES, BLIND_FIGURES, load_examples
from tests.benchmark_scripts import load_recipe
from tests.pipelines import toy
from tests.resume_points import CheckpointMidEpoch

ROOT = Path(__file__).resolve().parents[2]


def test_the_planted_corpus_holds_copied_test_items_and_canaries(tmp_path):
    files = toy.corpus(tmp_path)
    pool, tests = load_examples(files["pool"]), load_examples(files["test_set"])
    canaries = AttackSet.load(files["canaries"])
    always = load_examples(files["always_train"])
    assert pool["source"].count("docstring") == 40 and "canary" not in pool["source"]
    copied = [r for r in pool if r["source"] == "contaminated"]
    planted = [r for r in tests if r["planted"]]
    assert len(copied) == len(planted) == 4
    assert {(r["prompt"], r["response"]) for r in copied} == {
        (r["prompt"], r["response"]) for r in planted
    }
    members = [
        (p, f) for p, f, y in zip(canaries.prompts, canaries.fragments, canaries.labels) if y
    ]
    trained = {(r["prompt"] + "\n", r["response"]) for r in always if r["source"] == "canary"}
    assert len(members) == len(always) == 8 and set(members) == trained  # query = training text
    assert canaries.kinds.count("non_member") == canaries.kinds.count("unseen") == 8
    more = write_planted_sft_corpus(tmp_path / "more", pool_size=40, canaries=8, non_members=30)
    kinds = AttackSet.load(more["canaries"]).kinds
    assert (kinds.count("member"), kinds.count("non_member"), kinds.count("unseen")) == (8, 30, 8)


def _logged_columns(root: Path) -> set[str]:
    (metrics,) = root.glob("csv/pipeline/version_*/metrics.csv")
    with open(metrics) as f:
        return set(next(csv.reader(f)))


def test_every_stage_is_a_plugin_that_ran_and_logged(tmp_path):
    trainer, module, data, callbacks, tested = toy.fit_and_test(tmp_path)
    overlap, audit, constraint, report = callbacks
    # 1. decontaminate: the planted copies are flagged and left out of the pool
    flagged = {i for i, f in enumerate(data.scan.pool_flags) if f}
    copies = {i for i, r in enumerate(data.candidates) if r["source"] == "contaminated"}
    long_copies = {i for i in copies if len(data.candidates[i]["text"].split()) >= 13}
    assert len(long_copies) >= 3 and long_copies <= flagged  # shorter than n = 13: unseen
    assert data.num_kept_candidates == len(data.candidates) - len(flagged)
    assert not flagged & set(range(len(data.candidates))) - copies  # nothing else flagged
    assert data.scan.test_flags.sum() == len(flagged)  # the contaminated test subset
    # the overlap report reads the examples trained on: the selection and the canaries
    assert overlap.report is not None
    assert overlap.report.num_documents == len(data.selection.indices) == 16 + 8
    leaked = overlap.report.summary["test"]["any_overlap"]
    assert leaked == pytest.approx(data.leaked_fraction())
    # 2. select: FisherSFT picked the budget from the decontaminated pool; the 8 canaries
    # follow it, trained whatever the selection
    kept = data.num_kept_candidates
    chosen, always = data.selection.indices[:16], data.selection.indices[16:]
    assert len(set(chosen)) == 16 and all(i < kept for i in chosen)
    assert always == list(range(kept, kept + 8)) == list(range(kept, len(data.pool)))
    # 3. train: LoRA adapters only, every step constrained at this bound
    assert constraint.num_steps == trainer.global_step > 0
    assert constraint.constrained_fraction == 1.0
    trainable = [n for n, p in module.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    # 4. audit: the fragment-extraction report and the pipeline's figures
    assert audit.report is not None and "reference" in audit.report.metrics
    assert tested["test/leaked_fraction"] == 0.0  # nothing leaked past decontamination
    assert tested["test/constrained_fraction"] == 1.0
    assert tested["test/audit/negatives"] == 16.0
    assert [data.pool[i]["source"] for i in always] == ["canary"] * 8
    assert tested["test/audit/members_trained"] == 8.0  # every member query was trained
    # members against the never-planted records alone, checked with scikit-learn
    kinds = np.asarray(audit.attack_set.kinds)
    keep = kinds != "unseen"
    for attack in ("loss", "reference"):
        expected = roc_auc_score(audit.report.labels[keep], audit.report.scores[attack][keep])
        logged = tested[f"test/audit/{attack}/auc_vs_non_members"]
        assert logged == pytest.approx(expected, abs=1e-6)
    assert math.isfinite(tested["test/contamination_gap"])
    assert tested["test/contamination_gap"] == pytest.approx(
        tested["test/loss_contaminated"] - tested["test/loss_clean"], abs=1e-5
    )
    logged = {k: v for k, v in tested.items() if k in report.values}
    assert report.values == pytest.approx(logged, rel=1e-6)  # logged as float32
    columns = _logged_columns(tmp_path)
    for name in (
        "overlap/test/any_overlap",  # TrainTestOverlap
        "fisher/trace_before",  # FisherConstraint
        "fisher/constrained_fraction",
        "prism/reference/auc",  # FragmentExtractionAudit
        "prism/loss/tpr_at_0.1pct_fpr",
        "test/loss",  # CausalLMFineTuner
        "test/loss_clean",  # SFTPipelineReport
        "test/audit/reference/tpr_at_1pct_fpr",
    ):
        assert name in columns, name


def test_without_decontamination_the_copies_are_trained_on_and_leak(tmp_path):
    module, data, callbacks = toy.pipeline_parts(tmp_path, decontaminate=False, strategy="random")
    data.setup("fit")
    assert data.num_kept_candidates == len(data.candidates) == len(data.pool) - 8
    flagged = [i for i, f in enumerate(data.scan.pool_flags) if f]
    data.selection = Selection(flagged, [], 0.0, 1.0, len(data.pool))  # train on the copies
    assert data.leaked_fraction() == pytest.approx(data.scan.test_flags.mean())
    # a canary query's text is its training example's: members_trained counts by it
    canaries = [i for i, source in enumerate(data.pool["source"]) if source == "canary"]
    data.selection = Selection(canaries, [], 0.0, 1.0, len(data.pool))
    queries = callbacks[1].attack_set
    members = {p + f for p, f, y in zip(queries.prompts, queries.fragments, queries.labels) if y}
    assert members == set(data.selected_texts())


def test_always_train_examples_are_served_every_epoch_whatever_the_selection(tmp_path):
    from lightning_info.pipelines import SFTPipelineDataModule

    files = toy.corpus(tmp_path / "corpus")
    model_dir = toy.base_model(tmp_path / "base")
    # a user's file: its own extra column, no `source`
    own = tmp_path / "own.jsonl"
    rows = [{"prompt": f"Q{k}", "response": f"A{k}", "note": "mine"} for k in range(3)]
    own.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for seed in (0, 1):
        data = SFTPipelineDataModule(
            str(model_dir), str(files["pool"]), str(files["test_set"]), budget=5,
            strategy="random", seed=seed, always_train=str(own),
        )  # fmt: skip
        data.setup("fit")
        kept = data.num_kept_candidates
        assert kept == len(data.candidates) - int(data.scan.pool_flags.sum())
        assert len(data.pool) == kept + 3
        tail = data.pool.select(range(kept, kept + 3))
        assert tail["prompt"] == ["Q0", "Q1", "Q2"] and tail["source"] == [None] * 3
        assert tail["text"] == ["Q0\nA0", "Q1\nA1", "Q2\nA2"]
        for epoch in (0, 1):
            data.sampler.set_epoch(epoch)
            served = list(data.sampler)
            assert sorted(served) == sorted(data.selection.indices)
            assert len(served) == 8 and set(range(kept, kept + 3)) <= set(served)
    (tmp_path / "empty.jsonl").write_text("\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "Q", "response": "A"}) + "\n")
    for path, message in ((tmp_path / "empty.jsonl", "no JSON lines"), (bad, "always_train")):
        with pytest.raises(ValueError, match=message):
            SFTPipelineDataModule(
                str(model_dir), str(files["pool"]), str(files["test_set"]), budget=5,
                always_train=str(path),
            )  # fmt: skip


def test_the_report_refuses_unknown_attacks():
    with pytest.raises(ValueError, match="Unknown attacks"):
        SFTPipelineReport(attacks=["loss", "psychic"])


def test_the_recipe_runs_its_arms_on_a_local_model_and_local_data(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["recipe"])
    config = toy.toy_config(tmp_path)
    saved = tmp_path / "my_pool"  # a user's instruction set saved with datasets' save_to_disk
    load_examples(tmp_path / "corpus" / "pool.jsonl").save_to_disk(str(saved))
    arms = json.dumps(
        {
            "random subset": {"data": {"strategy": "random", "decontaminate": False}},
            "+ decontaminate": {"data": {"strategy": "random", "decontaminate": True}},
        }
    )
    cli = load_recipe("sft_pipeline").main(
        [f"--config={config}", f"--compare.arms={arms}", f"--data.pool={saved}"]
    )
    assert cli.datamodule.candidates.num_rows == 44  # 40 docstrings + 4 copies
    values = {(r.arm, r.metric): r.value for r in cli.results}
    assert values["random subset", "test/audit/members_trained"] == 8.0
    assert values["+ decontaminate", "test/leaked_fraction"] == 0.0
    assert values["random subset", "test/constrained_fraction"] == 0.0
    assert values["random subset", "test/audit/negatives"] == 16.0
    assert len(cli.results) == 2 * len(cli.config.compare.metrics)
    table = (tmp_path / "results" / "sft_pipeline.md").read_text()
    assert "random subset" in table and "test/audit/reference/tpr_at_0.1pct_fpr" in table
    callbacks = {type(c) for c in cli.trainer.callbacks}
    assert {TrainTestOverlap, FragmentExtractionAudit, SFTPipelineReport} <= callbacks
    assert FisherConstraint not in callbacks  # the constraint's arms add it


QUICK_YAML = toy.RECIPE_YAML.with_name("sft_pipeline_quick.yaml")


def test_the_quick_preset_runs_its_two_arms_on_a_corpus_sized_by_its_config(tmp_path, monkeypatch):
    import yaml

    monkeypatch.setattr(sys, "argv", ["recipe"])
    base, corpus = toy.base_model(tmp_path / "base"), tmp_path / "corpus"
    config = yaml.safe_load(QUICK_YAML.read_text())
    config = toy._replace(config, toy.BASE, str(base))
    config = toy._replace(config, "results/sft_pipeline_quick/corpus", str(corpus))
    sizes = {"pool_size": 40, "test_size": 12, "contaminated": 4, "canaries": 8}
    overrides = {
        "corpus": {**sizes, "non_members": 12},
        "model": {"model": str(base)},
        "data": {"tokenizer": str(base)},
        "compare": {"output_dir": str(tmp_path / "results")},
    }
    config = toy._merge(toy._merge(config, toy.TOY), overrides)
    config["trainer"]["default_root_dir"] = str(tmp_path / "logs")
    path = tmp_path / "quick.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    cli = load_recipe("sft_pipeline").main([f"--config={path}"])
    # the recipe wrote the corpus at the configured sizes
    kinds = AttackSet.load(corpus / "canaries.json").kinds
    assert (kinds.count("member"), kinds.count("non_member"), kinds.count("unseen")) == (8, 12, 8)
    assert cli.datamodule.candidates.num_rows == 44  # 40 docstrings + 4 copies
    values = {(r.arm, r.metric): r.value for r in cli.results}
    assert {arm for arm, _ in values} == {"random subset", "full pipeline"}
    assert len(cli.results) == 2 * len(config["compare"]["metrics"])
    assert values["random subset", "test/audit/negatives"] == 12.0 + 8.0  # non-members, unseen
    assert values["full pipeline", "test/audit/members_trained"] == 8.0
    assert values["full pipeline", "test/leaked_fraction"] == 0.0
    assert values["random subset", "test/constrained_fraction"] == 0.0
    (audit,) = [c for c in cli.trainer.callbacks if isinstance(c, FragmentExtractionAudit)]
    assert "tpr@1%fpr" in audit.report.metrics["loss"]
    assert "tpr@0.1%fpr" not in audit.report.metrics["loss"]  # too few negatives to report


def test_the_recipe_writes_its_corpus_again_only_when_the_sizes_change(tmp_path):
    recipe = load_recipe("sft_pipeline")
    out = tmp_path / "corpus"
    sizes = {"pool_size": 40, "test_size": 12, "contaminated": 4, "canaries": 8}
    corpus = recipe.PlantedCorpus(str(out), **sizes, non_members=10)
    recipe.prepare_corpus(corpus, str(tmp_path / "elsewhere" / "pool.jsonl"))
    assert not out.exists()  # the pool is the user's: nothing written
    recipe.prepare_corpus(corpus, str(out / "pool.jsonl"))
    assert AttackSet.load(out / "canaries.json").kinds.count("non_member") == 10
    written = (out / "pool.jsonl").stat().st_mtime_ns
    recipe.prepare_corpus(corpus, str(out / "pool.jsonl"))
    assert (out / "pool.jsonl").stat().st_mtime_ns == written  # same sizes: kept
    more = recipe.PlantedCorpus(str(out), **sizes, non_members=14)
    recipe.prepare_corpus(more, str(out / "pool.jsonl"))
    assert AttackSet.load(out / "canaries.json").kinds.count("non_member") == 14
    (out / "test.jsonl").unlink()
    recipe.prepare_corpus(more, str(out / "pool.jsonl"))
    assert len(load_examples(out / "test.jsonl")) == 12


def test_the_recipe_s_constraint_arms_attach_fisher_constraint():
    import yaml

    arms = yaml.safe_load(toy.RECIPE_YAML.read_text())["compare"]["arms"]
    constrained = {
        name
        for name, arm in arms.items()
        for c in arm.get("trainer", {}).get("callbacks+", [])
        if c["class_path"] == "lightning_info.FisherConstraint"
    }
    assert constrained == {"+ FisherConstraint", "full pipeline"}
    assert list(arms)[0] == "random subset"


def test_every_metric_the_report_logs_is_a_metric_name(tmp_path):
    trainer, _, _, callbacks, tested = toy.fit_and_test(tmp_path)
    report = callbacks[3]
    assert report.values and set(report.values) <= set(tested)
    assert all(METRIC_NAME.fullmatch(name) for name in report.values), sorted(report.values)
    logged = _logged_columns(tmp_path)
    assert set(report.values) <= logged
    assert all(METRIC_NAME.fullmatch(name) for name in logged), sorted(logged)
    # the audit's figures: every attack's, named by metric_key
    audit = {name for name in report.values if name.startswith("test/audit/")}
    expected = {metric_key("test/audit", a, f) for a in ATTACKS for f in AUDIT_FIGURES}
    expected |= {metric_key("test/audit/blind", f) for f in BLIND_FIGURES}
    assert audit == expected | {"test/audit/negatives", "test/audit/members_trained"}
    assert "test/audit/min_kplusplus/tpr_at_0.1pct_fpr" in audit
    assert "test/audit/target/tpr_at_1pct_fpr" in audit
    assert "test/audit/target/auc_vs_non_members" in audit
    # the same numbers as the audit's own report, under the report's keys
    metrics = callbacks[1].report.metrics
    assert (
        report.values["test/audit/min_kplusplus/tpr_at_1pct_fpr"] == metrics["min_k++"]["tpr@1%fpr"]
    )
    assert (
        report.values["test/audit/loss/auc_vs_non_members"] == metrics["loss"]["auc vs non-members"]
    )
    for attack, figure, key in (
        ("zlib", "auc_se_vs_non_members", "auc_se vs non-members"),
        ("target", "beats_blind_vs_non_members", "beats_blind vs non-members"),
        ("min_k", "tpr_at_1pct_fpr_at_most", "tpr@1%fpr at most"),
        ("lr", "pr_auc", "pr_auc"),
    ):
        assert report.values[f"test/audit/{attack}/{figure}"] == metrics[attack][key]
    blind = callbacks[1].report.blind
    assert report.values["test/audit/blind/auc"] == blind["auc"]
    assert report.values["test/audit/blind/auc_vs_non_members"] == blind["auc vs non-members"]


def test_the_recipe_s_metrics_are_names_the_pipeline_logs():
    import yaml

    for config in (toy.RECIPE_YAML, toy.RECIPE_YAML.with_name("sft_pipeline_quick.yaml")):
        metrics = yaml.safe_load(config.read_text())["compare"]["metrics"]
        assert all(METRIC_NAME.fullmatch(m) for m in metrics), config
        audit = {m for m in metrics if m.startswith("test/audit/") and m.count("/") == 3}
        names = {metric_key("test/audit", a, f) for a in ATTACKS for f in AUDIT_FIGURES}
        names |= {metric_key("test/audit/blind", f) for f in BLIND_FIGURES}
        assert audit <= names


def _audit_parts(root: Path):
    from lightning_info.lm.tiny_lm import load_causal_lm

    model_dir, files, _ = toy.prepare(root)
    target, tokenizer = load_causal_lm(str(model_dir))
    return target, tokenizer, AttackSet.load(files["canaries"]), model_dir


def test_the_audit_s_progress_bar_counts_every_query_of_every_model(tmp_path, capsys):
    from lightning_info.methods.prism.auditor import FragmentAuditOptions, FragmentAuditor
    from lightning_info.methods.prism.functional import fragment_token_statistics

    target, tokenizer, attack, model_dir = _audit_parts(tmp_path)
    options = FragmentAuditOptions(batch_size=5, data_aware="logistic")
    auditor = FragmentAuditor(target, str(model_dir), [str(model_dir)], tokenizer, options)
    capsys.readouterr()
    shown = auditor.token_statistics(attack, progress=True)
    bar = capsys.readouterr().err
    total = 3 * len(attack)  # target, shadow, one world model
    assert "fragment extraction audit" in bar and f"{total}/{total}" in bar
    quiet = auditor.token_statistics(attack)
    assert capsys.readouterr().err == ""
    # one batch at a time gives the whole set's values exactly (the same batches)
    whole = fragment_token_statistics(target, tokenizer, attack.prompts, attack.fragments, 5)
    for tokens in (shown["target"], quiet["target"]):
        for field in ("log_probs", "means", "stds"):
            mine, oracle = getattr(tokens, field), getattr(whole, field)
            assert len(mine) == len(oracle) == len(attack)
            assert all(torch.equal(a, b) for a, b in zip(mine, oracle)), field
    shadow = fragment_token_statistics(
        target, tokenizer, attack.prompts, attack.fragments, 5, vocabulary_moments=False
    )
    assert all(torch.equal(a, b) for a, b in zip(shown["shadow"].log_probs, shadow.log_probs))
    assert shown["world 0"].means == [] and shown["shadow"].stds == []


@pytest.mark.parametrize(
    ("progress", "trainer_bar", "shown"),
    [(True, True, True), (True, False, False), (False, True, False)],
    ids=["bar", "trainer-without-bar", "progress-off"],
)
def test_the_audit_callback_shows_progress_only_where_the_trainer_does(
    tmp_path, capsys, progress, trainer_bar, shown
):
    from lightning.pytorch import Trainer

    from lightning_info import CausalLMFineTuner
    from lightning_info.methods.prism.auditor import FragmentAuditOptions

    _, tokenizer, attack, model_dir = _audit_parts(tmp_path)
    audit = FragmentExtractionAudit(
        attack,
        shadow=str(model_dir),
        world_models=str(model_dir),
        tokenizer=tokenizer,
        options=FragmentAuditOptions(data_aware="logistic"),
        progress=progress,
    )
    trainer = Trainer(logger=False, enable_progress_bar=trainer_bar, default_root_dir=str(tmp_path))
    capsys.readouterr()
    audit.on_fit_end(trainer, CausalLMFineTuner(str(model_dir)))
    assert audit.report is not None
    assert ("fragment extraction audit" in capsys.readouterr().err) == shown


def test_the_audit_report_prints_its_counts_as_integers(tmp_path, lightning_messages):
    _, _, _, callbacks, _ = toy.fit_and_test(tmp_path)
    printed = "\n".join(lightning_messages)
    assert "\nnegatives: 16\n" in printed
    assert "negatives needed for tpr@0.1%fpr: 1000\n" in printed
    assert "negatives needed for tpr@5%fpr: 20\n" in printed
    share = callbacks[1].report.diagnostics["share of queries with p_w > p_s"]
    assert f"share of queries with p_w > p_s: {share:.4f}" in printed


class FirstStep(Callback):
    """Records the global step of the first training batch a run takes."""

    step = None

    def on_train_batch_start(self, trainer, *_):
        if self.step is None:
            self.step = trainer.global_step


def test_a_run_resumed_mid_epoch_ends_with_the_same_metrics(tmp_path):
    checkpoint = tmp_path / "mid-epoch.ckpt"
    _, _, _, straight_callbacks, straight = toy.fit_and_test(
        tmp_path / "straight", extra_callbacks=[CheckpointMidEpoch(checkpoint)], max_epochs=3
    )
    assert checkpoint.exists()
    first_step = FirstStep()
    resumer, _, _, resumed_callbacks, resumed = toy.fit_and_test(
        tmp_path / "resumed",
        seed=123,
        ckpt_path=str(checkpoint),
        max_epochs=3,
        extra_callbacks=[first_step],
    )
    batches = resumer.num_training_batches
    assert first_step.step == batches + batches // 2  # in the middle of the second epoch
    assert resumed == pytest.approx(straight, abs=1e-6)
    assert resumed_callbacks[2].state_dict() == straight_callbacks[2].state_dict()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_pipeline_runs_under_ddp_on_two_cpu_processes(tmp_path):
    out = tmp_path / "ddp.json"
    toy.prepare(tmp_path / "run")  # the run's inputs, written before either rank starts
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    command += ["--master-port", str(_free_port()), "-m", "tests.pipelines.ddp_run", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    assert all(r["world_size"] == 2 for r in ranks)
    first, second = ranks
    assert first["tested"] == pytest.approx(second["tested"])  # every rank logs the same figures
    assert first["selection"] == second["selection"]
    assert first["tested"]["test/leaked_fraction"] == 0.0
    assert first["tested"]["test/audit/negatives"] == 16.0
    # the audit's queries: every other one on each rank, together every query once
    by_rank = {r["rank"]: r["scored_queries"] for r in ranks}
    n = first["queries"]
    assert by_rank == {0: list(range(0, n, 2)), 1: list(range(1, n, 2))}
    (zero,) = [r for r in ranks if r["rank"] == 0]
    # one process's audit of the same model: equal up to float32 noise (shards pad differently)
    assert zero["audit_gap"] < 1e-5
