"""``lightning-info audit`` end to end through the installed entry point: on a tiny GPT-2
fine-tuned here on the member texts, its numbers equal those of ``FragmentAuditor`` run directly
on the same models and texts (with a reference model, and from a YAML config without one); each
bad input exits with status 2 before anything is written."""

from __future__ import annotations

import copy
import json
import re
import subprocess

import numpy as np
import pytest
import torch

from tests.cli.entry_point import ok, refused, run, run_here, write_jsonl

COLOURS = ["red", "blue", "green", "amber", "violet", "white", "black", "grey", "pink", "teal"]
SINGLE_MODEL_ATTACKS = ["target", "loss", "zlib", "min_k", "min_k++"]
METRICS = ["auc", "tpr@0.1%fpr", "tpr@1%fpr", "tpr@2%fpr", "tpr@5%fpr"]


def records(first: int, count: int) -> list[dict]:
    return [
        {
            "id": i,
            "prompt": f"Record {i}:",
            "response": f"the {COLOURS[i % 10]} box holds {i * 37 % 101} stones and "
            f"{COLOURS[i * 7 % 10]} sand",
        }
        for i in range(first, first + count)
    ]


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """Member and non-member files, a base model (the reference) and a target fine-tuned from it
    on the members until it memorises them, both saved and loaded back."""
    from lightning_info.lm.features import pad_token_rows
    from lightning_info.lm.tiny_lm import load_causal_lm, tiny_causal_lm, train_bpe_tokenizer
    from lightning_info.methods.prism.functional import encode_prompt_fragment

    root = tmp_path_factory.mktemp("audit")
    members, non_members = records(0, 16), records(16, 16)
    texts = [f"{r['prompt']} {r['response']}" for r in members + non_members]
    tokenizer = train_bpe_tokenizer(texts, vocab_size=300)
    base = tiny_causal_lm(tokenizer, n_layer=1, n_embd=32, n_head=2, n_positions=64, seed=0)
    target = copy.deepcopy(base).train()
    rows = [encode_prompt_fragment(tokenizer, r["prompt"], r["response"])[0] for r in members]
    ids, mask = pad_token_rows(rows, tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW(target.parameters(), lr=1e-2)
    for _ in range(60):
        loss = target(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100))
        optimizer.zero_grad()
        loss.loss.backward()
        optimizer.step()
    for name, model in (("base", base), ("target", target.eval())):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return {
        "root": root,
        "members": write_jsonl(root / "members.jsonl", members),
        "non_members": write_jsonl(root / "non_members.jsonl", non_members),
        "records": (members, non_members),
        "target": load_causal_lm(str(root / "target")),
        "base": load_causal_lm(str(root / "base")),
    }


def auditor_report(audited, prompts, texts):
    """FragmentAuditor run directly: the target, and the base as shadow (its reference model)
    and as world model."""
    from lightning_info.methods.prism import FragmentAuditOptions, FragmentAuditor
    from lightning_info.methods.prism.fragments import AttackSet

    target, tokenizer = audited["target"]
    kinds = ["member"] * 16 + ["non_member"] * 16
    attack = AttackSet(prompts, texts, [int(k == "member") for k in kinds], kinds)
    base = audited["base"]
    auditor = FragmentAuditor(
        target, base, [base], tokenizer, FragmentAuditOptions(n_splits=2, data_aware="logistic")
    )
    return auditor.run(attack)


def same_metrics(written: dict, expected: dict, attacks: list[str]) -> None:
    assert list(written) == attacks
    for attack in attacks:
        assert list(written[attack]) == METRICS
        for metric in METRICS:
            assert written[attack][metric] == pytest.approx(
                expected[attack][metric], rel=1e-9, abs=1e-12
            ), (attack, metric)


def test_help_lists_every_option_with_its_description():
    result = ok(run("audit", "--help"))
    for flag in ("--model", "--members", "--non_members", "--reference", "--template"):
        assert flag in result.stdout
    assert "membership" in result.stdout


def test_the_audit_equals_fragment_auditor_on_the_same_models_and_texts(audited, tmp_path):
    out = tmp_path / "out"
    result = ok(
        run(
            "audit",
            "--model",
            audited["root"] / "target",
            "--reference",
            audited["root"] / "base",
            "--members",
            audited["members"],
            "--non_members",
            audited["non_members"],
            "--text_field",
            "response",
            "--prompt_template",
            "{prompt}",
            "--output_dir",
            out,
        )
    )
    members, non_members = audited["records"]
    prompts = [r["prompt"] for r in members + non_members]
    texts = [r["response"] for r in members + non_members]
    expected = auditor_report(audited, prompts, texts).metrics
    report = json.loads((out / "audit.json").read_text())
    same_metrics(report["attacks"], expected, [*SINGLE_MODEL_ATTACKS, "reference"])
    assert report["attacks"]["loss"]["auc"] > 0.9  # the target memorised its members
    assert report["counts"]["members"] == 16 and report["counts"]["non-members"] == 16
    markdown = (out / "audit.md").read_text()
    assert markdown.strip() in result.stdout
    assert re.search(r"\| members +\| 16 +\|", markdown)
    assert re.search(r"\| non-members needed for tpr@1%fpr +\| 100 +\|", markdown)
    assert f"| loss      | {expected['loss']['auc']:.4f} |" in markdown


def test_a_yaml_config_with_fields_and_no_reference_equals_fragment_auditor(audited, tmp_path):
    config = tmp_path / "audit.yaml"
    config.write_text(
        f"model: {audited['root'] / 'target'}\n"
        f"members: {audited['members']}\n"
        f"non_members: {audited['non_members']}\n"
        "fields: [prompt, response]\n"
        "batch_size: 5\n"
        f"output_dir: {tmp_path / 'out'}\n"
    )
    ok(run("audit", "--config", config))
    members, non_members = audited["records"]
    texts = [f"{r['prompt']}\n{r['response']}" for r in members + non_members]
    expected = auditor_report(audited, [""] * len(texts), texts).metrics
    report = json.loads((tmp_path / "out" / "audit.json").read_text())
    same_metrics(report["attacks"], expected, SINGLE_MODEL_ATTACKS)
    assert report["reference"] is None


# -- bad input: exit status 2, the file (and line) named, nothing written ----------------------


def _audit(tmp_path, members, non_members, *extra, script=False) -> subprocess.CompletedProcess:
    """``lightning-info audit`` refused: in this process, or through the script (``script``)."""
    return (run if script else run_here)(
        "audit",
        "--model",
        tmp_path / "model",
        "--members",
        members,
        "--non_members",
        non_members,
        "--text_field",
        "response",
        "--output_dir",
        tmp_path / "out",
        *extra,
    )


@pytest.fixture
def files(tmp_path):
    return (
        write_jsonl(tmp_path / "members.jsonl", records(0, 4)),
        write_jsonl(tmp_path / "non_members.jsonl", records(4, 4)),
    )


def test_a_missing_member_file_is_refused(tmp_path, files):
    refused(_audit(tmp_path, tmp_path / "absent.jsonl", files[1]), "absent.jsonl", "does not exist")
    assert not (tmp_path / "out").exists()


def test_a_line_that_is_not_json_is_refused_with_its_file_and_line(tmp_path, files):
    lines = files[1].read_text().splitlines()
    lines[1] = lines[1][:-3]
    files[1].write_text("\n".join(lines) + "\n")
    result = _audit(tmp_path, *files, script=True)
    refused(result, "non_members.jsonl, line 2", "not valid JSON")
    assert not (tmp_path / "out").exists()


def test_a_record_without_the_text_field_is_refused_with_its_file_and_line(tmp_path, files):
    members = records(0, 4)
    members[2] = {"id": 2, "prompt": "Record 2:", "answer": "the box"}
    write_jsonl(files[0], members)
    refused(_audit(tmp_path, *files), "members.jsonl, line 3", "'response'", "['answer', 'id'")
    assert not (tmp_path / "out").exists()


def test_an_empty_member_file_is_refused(tmp_path, files):
    files[0].write_text("")
    refused(_audit(tmp_path, *files), "members.jsonl", "no records")
    assert not (tmp_path / "out").exists()


def test_an_empty_non_member_file_is_refused(tmp_path, files):
    files[1].write_text("\n")
    refused(_audit(tmp_path, *files), "non_members.jsonl", "no records")
    assert not (tmp_path / "out").exists()


def test_a_text_given_as_member_and_as_non_member_is_refused(tmp_path, files):
    write_jsonl(files[1], [*records(4, 2), records(0, 4)[3]])
    refused(_audit(tmp_path, *files), "non_members.jsonl, line 3", "members.jsonl, line 4")
    assert not (tmp_path / "out").exists()


def test_a_model_folder_without_config_json_is_refused(tmp_path, files):
    (tmp_path / "model").mkdir()
    refused(_audit(tmp_path, *files), str(tmp_path / "model"), "no config.json")
    assert not (tmp_path / "out").exists()


def test_a_reference_folder_without_config_json_is_refused(tmp_path, files, audited):
    (tmp_path / "model").symlink_to(audited["root"] / "target")
    (tmp_path / "reference").mkdir()
    result = _audit(tmp_path, *files, "--reference", tmp_path / "reference")
    refused(result, str(tmp_path / "reference"), "reference folder has no config.json")
    assert not (tmp_path / "out").exists()


def test_an_output_dir_that_is_a_file_is_refused(tmp_path, files):
    (tmp_path / "out").write_text("keep me")
    refused(_audit(tmp_path, *files), str(tmp_path / "out"), "output_dir is a file")
    assert (tmp_path / "out").read_text() == "keep me"


# -- the statistics, the blind baseline, the extra attacks and mimir.json ---------------------


def test_the_new_figures_equal_the_statistics_functions_on_the_same_scores(audited, tmp_path):
    from lightning_info.methods.prism.auditor import FragmentAuditOptions
    from lightning_info.methods.prism.blind import beats_blind, blind_baseline_auc
    from lightning_info.methods.prism.extra_attacks import extra_attack_scores
    from lightning_info.methods.prism.statistics import membership_report, mimir_layout

    out = tmp_path / "out"
    result = ok(
        run(
            "audit",
            "--model",
            audited["root"] / "target",
            "--members",
            audited["members"],
            "--non_members",
            audited["non_members"],
            "--text_field",
            "response",
            "--prompt_template",
            "{prompt}",
            "--extra_attacks",
            '["gradnorm", "recall", "dc_pdd"]',
            "--bootstrap_resamples",
            "200",
            "--output_dir",
            out,
        )
    )
    members, non_members = audited["records"]
    prompts = [r["prompt"] for r in members + non_members]
    texts = [r["response"] for r in members + non_members]
    labels = [1] * 16 + [0] * 16
    direct = auditor_report(audited, prompts, texts).scores
    target, tokenizer = audited["target"]
    options = FragmentAuditOptions(extra_attacks=("gradnorm", "recall", "dc_pdd"))
    direct |= extra_attack_scores(target, tokenizer, prompts, texts, labels, options)
    report = json.loads((out / "audit.json").read_text())
    assert list(report["statistics"]) == [*SINGLE_MODEL_ATTACKS, "gradnorm", "recall", "dc_pdd"]
    y = np.asarray(labels)
    for attack, row in report["statistics"].items():
        scored = ~np.isnan(direct[attack])
        levels = (0.001, 0.01, 0.02, 0.05)
        expected = membership_report({attack: direct[attack][scored]}, y[scored], levels, 200, 0)
        assert row.keys() == expected[attack].keys()
        for key, value in expected[attack].items():
            assert row[key] == pytest.approx(value, rel=1e-6, abs=1e-9), (attack, key)
    assert report["statistics"]["recall"]["non_members"] == 11  # 5 texts form its prefix
    assert report["statistics"]["loss"]["members"] == 16
    whole = [p + t for p, t in zip(prompts, texts)]
    blind = blind_baseline_auc(whole[:16], whole[16:], folds=5, seed=0)
    assert report["blind"] == pytest.approx(blind, abs=1e-12)
    assert report["beats_blind"] == {
        attack: beats_blind(row["auc"], row["auc_se"], blind["auc"])
        for attack, row in report["statistics"].items()
    }
    mimir = json.loads((out / "mimir.json").read_text())
    assert mimir == json.loads(json.dumps(mimir_layout(report["statistics"])))
    markdown = (out / "audit.md").read_text()
    assert markdown.strip() in result.stdout
    assert "LiRA's convention" in markdown
    assert "n/a (needs >= 100 negatives)" in markdown  # 16 non-members: no TPR is measured
    assert "n/a (needs >= 20 negatives)" in markdown
    auc, se = report["attacks"]["loss"]["auc"], report["statistics"]["loss"]["auc_se"]
    assert re.search(rf"\| loss +\| {auc:.4f} \| {se:.4f} +\|", markdown)
    assert re.search(r"\| recall +\|.*\| 16 +\| 11 +\|", markdown)  # integer counts
    assert f"AUC {blind['auc']:.4f} ± {blind['auc_se']:.4f}" in markdown
    assert "distribution check: shared word 7-grams" in markdown


def test_the_neighbourhood_attack_and_one_resample_are_refused(tmp_path, files, audited):
    (tmp_path / "model").symlink_to(audited["root"] / "target")
    result = _audit(tmp_path, *files, "--extra_attacks", '["neighbourhood"]')
    refused(result, "needs a mask filler")
    result = _audit(tmp_path, *files, "--bootstrap_resamples", "1")
    refused(result, "bootstrap_resamples must be an integer >= 2")
    assert not (tmp_path / "out").exists()
