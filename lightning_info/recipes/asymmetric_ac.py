"""``AsymmetricACCLI``: the asymmetric actor-critic recipe, tabular study then deep comparison.

Before the usual :class:`ComparisonCLI` grid (the neural :class:`AsymmetricActorCritic` on a
masked gymnasium task, asymmetric vs symmetric critic), it runs the linear study of the paper on
a T-maze (``tabular`` section of the config): critic error vs TD updates with the aliasing floor,
and natural actor-critic with each critic. Tables are printed and written to
``<output_dir>/<name>_tabular.{md,json}``, plots to ``<name>_critic_error.png`` and
``<name>_actor_critic.png``, and both go to a W&B run ``<name>-tabular`` when the logger is W&B.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lightning.pytorch.cli import LightningArgumentParser

from lightning_info.core.logging import finish_wandb_runs, log_wandb_tables, markdown_table
from lightning_info.methods.asymmetric_ac.functional import SGDSettings
from lightning_info.methods.asymmetric_ac.study import (
    actor_critic_study,
    actor_critic_table,
    critic_error_study,
    critic_error_table,
    plot_actor_critic,
    plot_critic_errors,
)
from lightning_info.methods.asymmetric_ac.tabular_pomdp import t_maze
from lightning_info.recipes.cli import ComparisonCLI, RunResult


@dataclass
class TabularStudy:
    """The T-maze study (``enabled: false`` skips it)."""

    enabled: bool = True
    corridor_length: int = 1
    sign_accuracy: float = 1.0
    penalty: float = -0.5
    gamma: float = 0.8
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    critic_windows: list[int] = field(default_factory=lambda: [1, 2, 3])
    td_steps: list[int] = field(default_factory=lambda: [1, 4])
    updates: list[int] = field(default_factory=lambda: [25, 100, 400, 1600, 6400])
    batch_size: int = 64
    step_size: float = 1.0
    actor_critic_windows: list[int] = field(default_factory=lambda: [1, 2])
    iterations: int = 10
    actor_step_size: float = 2.0
    critic_updates: int = 1000
    actor_updates: int = 200


class AsymmetricACCLI(ComparisonCLI):
    """:class:`ComparisonCLI` with the tabular study of the asymmetric actor-critic paper first."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        super().add_arguments_to_parser(parser)
        parser.add_class_arguments(TabularStudy, "tabular")

    def run(self) -> list[RunResult]:
        study = TabularStudy(**vars(self.config.tabular))
        if study.enabled:
            self.tabular = self.run_tabular(study)
        return super().run()

    def run_tabular(self, study: TabularStudy) -> dict:
        name, out = self.config.compare.name, Path(self.config.compare.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        maze = t_maze(study.corridor_length, study.sign_accuracy, penalty=study.penalty)
        print(f"{name}: critic error vs TD updates on the T-maze ...", flush=True)
        critic_rows = critic_error_study(
            maze,
            study.critic_windows,
            study.td_steps,
            study.updates,
            study.gamma,
            study.seeds,
            study.batch_size,
            study.step_size,
        )
        print(f"{name}: natural actor-critic with each critic ...", flush=True)
        actor_rows = actor_critic_study(
            maze,
            study.actor_critic_windows,
            study.td_steps,
            study.gamma,
            study.seeds,
            study.iterations,
            study.actor_step_size,
            SGDSettings(study.critic_updates, study.batch_size, study.step_size),
            SGDSettings(study.actor_updates, study.batch_size, study.step_size),
        )
        critic_title = f"critic error after {max(study.updates)} TD updates (mean ± std)"
        actor_title = f"J after {study.iterations} natural actor-critic iterations"
        tables = {
            critic_title: critic_error_table(critic_rows),
            actor_title: actor_critic_table(actor_rows),
        }
        text = "\n\n".join(f"{title}\n\n{markdown_table(*t)}" for title, t in tables.items())
        print(f"\n{name} (T-maze, gamma {study.gamma})\n\n{text}\n", flush=True)
        (out / f"{name}_tabular.md").write_text(text + "\n")
        results = {"config": asdict(study), "critic": critic_rows, "actor_critic": actor_rows}
        (out / f"{name}_tabular.json").write_text(json.dumps(results, indent=1) + "\n")
        plots = {
            "critic_error": plot_critic_errors(critic_rows, str(out / f"{name}_critic_error.png")),
            "actor_critic": plot_actor_critic(actor_rows, str(out / f"{name}_actor_critic.png")),
        }
        run = self.wandb_run("tabular")
        if run is not None:
            for key in plots:
                run.log_image(key=f"tabular/{key}", images=[str(out / f"{name}_{key}.png")])
            keyed = {f"tabular/table_{i}": table for i, table in enumerate(tables.values())}
            log_wandb_tables([run], keyed)
            finish_wandb_runs([run])
        return results
