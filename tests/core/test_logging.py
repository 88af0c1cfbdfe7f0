"""W&B offline defaults and the Markdown table."""

from __future__ import annotations

import json

import pytest

from lightning_info.core.logging import (
    METRIC_NAME,
    default_wandb_logger_config,
    markdown_table,
    metric_key,
    numeric_table,
    wandb_is_configured,
    wandb_offline_by_default,
)


@pytest.fixture
def clean_env(tmp_path, monkeypatch):
    for var in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    return tmp_path / "netrc"


def test_offline_without_credentials(clean_env):
    assert not wandb_is_configured()
    assert wandb_offline_by_default()
    assert default_wandb_logger_config()["init_args"]["offline"] is True


def test_online_with_a_netrc_entry(clean_env):
    clean_env.write_text("machine api.wandb.ai\n  login user\n  password abc\n")
    clean_env.chmod(0o600)
    assert wandb_is_configured() and not wandb_offline_by_default()


def test_online_with_an_api_key_unless_mode_says_offline(clean_env, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert not wandb_offline_by_default()
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert wandb_offline_by_default()


def test_explicit_online_mode_wins(clean_env, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "online")
    assert not wandb_offline_by_default()


def test_markdown_table_aligns_columns():
    table = markdown_table(["a", "long name"], [[1, "x"], ["wide value", 2]])
    lines = table.splitlines()
    assert lines[0] == "| a          | long name |"
    assert lines[1] == "|------------|-----------|"
    assert lines[3] == "| wide value | 2         |"
    assert len({len(line) for line in lines}) == 1


def test_mean_std_uses_the_sample_standard_deviation():
    from lightning_info.core.logging import mean_std

    assert mean_std([1.0, 2.0, 3.0]) == "2.0000 ± 1.0000"
    assert mean_std([0.5]) == "0.5000 ± 0.0000"
    assert mean_std([]) == "-"


def test_mean_std_rows_averages_each_cell_over_the_per_seed_tables():
    from lightning_info.core.logging import mean_std_rows

    records = [
        {
            "columns": ["scorer", "auroc", "ece"],
            "rows": {"a": {"auroc": 0.9, "ece": 0.1}, "b": {"auroc": 0.5, "ece": 0.3}},
        },
        {
            "columns": ["scorer", "auroc", "ece"],
            "rows": {"a": {"auroc": 0.7, "ece": 0.1}, "b": {"auroc": 0.6, "ece": 0.5}},
        },
    ]
    columns, rows = mean_std_rows(records)
    assert columns == ["scorer", "auroc", "ece"]
    # mean (x + y) / 2 and sample std |x - y| / sqrt(2), by hand
    assert rows == [
        ["a", "0.8000 ± 0.1414", "0.1000 ± 0.0000"],
        ["b", "0.5500 ± 0.0707", "0.4000 ± 0.1414"],
    ]


def test_log_wandb_tables_writes_to_wandb_loggers_only(tmp_path, monkeypatch):
    from lightning.pytorch.loggers import CSVLogger, WandbLogger

    from lightning_info.core.logging import finish_wandb_runs, log_wandb_tables

    monkeypatch.setenv("WANDB_MODE", "offline")
    wandb_logger = WandbLogger(save_dir=str(tmp_path), offline=True)
    csv_logger = CSVLogger(str(tmp_path / "csv"))
    log_wandb_tables([csv_logger, wandb_logger], {"demo/table": (["a", "b"], [[1, 0.5]])})
    finish_wandb_runs([wandb_logger])
    files = list((tmp_path / "wandb").glob("offline-run-*/files/media/table/demo/table*.json"))
    assert len(files) == 1
    assert json.loads(files[0].read_text())["data"] == [[1, 0.5]]  # numbers, not strings


def test_log_wandb_line_plots_writes_each_series(tmp_path, monkeypatch):
    from lightning.pytorch.loggers import CSVLogger, WandbLogger

    from lightning_info.core.logging import finish_wandb_runs, log_wandb_line_plots

    monkeypatch.setenv("WANDB_MODE", "offline")
    wandb_logger = WandbLogger(save_dir=str(tmp_path), offline=True)
    csv_logger = CSVLogger(str(tmp_path / "csv"))
    plots = {
        "demo/curve": ("questions", [0, 1, 2], {"eig": [0.5, 0.7, 0.9], "random": [0.5, 0.6, 0.65]})
    }
    log_wandb_line_plots([csv_logger, wandb_logger], plots)
    finish_wandb_runs([wandb_logger])
    files = list((tmp_path / "wandb").glob("offline-run-*/files/media/table/demo/curve*.json"))
    assert len(files) == 1
    text = files[0].read_text()
    assert "0.65" in text and '"eig"' in text and '"random"' in text


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("failure", "MSP (temperature)", "AUROC"), "failure/msp_temperature/auroc"),
        (("audit", "target", "tpr@1%fpr"), "audit/target/tpr_at_1pct_fpr"),
        (("audit", "target", "tpr@0.1%fpr"), "audit/target/tpr_at_0.1pct_fpr"),
        (("posthoc/ood", "energy", "digits789 AUROC"), "posthoc/ood/energy/digits789_auroc"),
        (("test/loss",), "test/loss"),
        (("+ decontaminate",), "plus_decontaminate"),
    ],
)
def test_metric_key_spells_out_and_joins_one_way(parts, expected):
    assert metric_key(*parts) == expected
    assert METRIC_NAME.fullmatch(expected)


def test_metric_key_refuses_a_part_that_names_nothing():
    with pytest.raises(ValueError, match="names nothing"):
        metric_key("posthoc", " () ")


def test_numeric_table_splits_mean_std_and_keeps_text_columns_as_text():
    columns, rows = numeric_table(
        ["data set", "acc", "loss", "note"],
        [["a", "0.5000 ± 0.1000", 1, "-"], ["b", "nan ± nan", "2.5", 3]],
    )
    assert columns == ["data set", "acc/mean", "acc/std", "loss", "note"]
    assert rows[0] == ["a", 0.5, 0.1, 1, "-"]
    assert rows[1][:2] == ["b", pytest.approx(float("nan"), nan_ok=True)]
    assert rows[1][3:] == [2.5, "3"]  # a column mixing numbers and text is text


def test_the_wandb_logger_passes_no_anonymous_setting_and_creates_its_folder(tmp_path):
    from lightning_info.core.logging import WandbLogger

    logger = WandbLogger(save_dir=tmp_path / "logs", offline=True, project="p", job_type="arm")
    assert "anonymous" not in logger._wandb_init
    assert logger._wandb_init["job_type"] == "arm"
    assert (tmp_path / "logs").is_dir()
    assert WandbLogger(save_dir=tmp_path, anonymous=True)._wandb_init["anonymous"] == "allow"
