"""Deep asymmetric actor-critic: a LightningModule that collects gymnasium episodes in its step.

The actor ``pi(a | z)`` sees only the agent state ``z`` (a window of the last ``window`` partial
observations); the critic ``V(s, z)`` also sees the privileged state ``s`` that the environment
reports in ``info["state"]`` at training time (asymmetric), or only ``V(z)`` (symmetric,
``asymmetric=False``). Because ``(s_t, z_t)`` is Markov under an agent-state policy, the
asymmetric critic has no aliasing bias (Lambrechts, Ernst & Mahajan, ICML 2025, Thm. 1 vs 2).

One training step runs ``a2c.num_envs`` episodes to their end with the current policy and takes
one Adam step (a learning rate each for the actor and the critic) on

    G_t   = sum_{i<m'} gamma^i r_{t+i} + gamma^{m'} V(x_{t+m'})   (m-step return, m' <= m, cut at
            the episode's end; no bootstrap after termination, a bootstrap after truncation)
    L_V   = mean_t (V(x_t) - G_t)^2
    L_pi  = -mean_t [log pi(a_t | z_t) (G_t - V(x_t))] - c_H mean_t H(pi(. | z_t))

with ``x_t = (s_t, z_t)`` or ``z_t``. The episodes, the environment seeds and the action draws are
a pure function of ``(seed, step, rank)``, so a resumed run continues exactly; under DDP every rank
collects its own episodes and the gradients are averaged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from lightning_info.core.optional import require_extra
from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.validation import (
    require_bool,
    require_finite_tensor,
    require_indices,
    require_int,
    require_non_negative,
    require_positive,
    require_probability,
)
from lightning_info.methods.asymmetric_ac.wrappers import ObservationWindow, PartialObservation

gym = require_extra("gymnasium", "control", "The actor-critic modules")
spaces = gym.spaces

EnvFactory = Callable[[], gym.Env]

_TRAIN_STREAM, _TEST_STREAM = 0, 1


class _FullState(gym.Wrapper):
    """Report the observation as ``info["state"]`` unless the environment reports its own."""

    @staticmethod
    def _with_state(observation, info: dict) -> dict:
        if "state" in info:
            return info
        return {**info, "state": np.array(observation, copy=True)}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        observation, info = self.env.reset(seed=seed, options=options)
        return observation, self._with_state(observation, info)

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, reward, terminated, truncated, self._with_state(observation, info)


def make_agent_env(
    env: str | EnvFactory,
    keep: Sequence[int] | None = None,
    window: int = 1,
    max_episode_steps: int | None = None,
) -> gym.Env:
    """``env`` (a gymnasium id or a factory) with the privileged state in ``info["state"]``.

    ``keep`` hides every other coordinate of a 1-D ``Box`` observation
    (:class:`PartialObservation`); ``None`` keeps them all, and the environment's own
    ``info["state"]`` is the privileged state, or the observation when it reports none. The agent
    sees the last ``window`` observations (:class:`ObservationWindow`).

    ``max_episode_steps`` limits the episodes of a gymnasium id (replacing its registered limit)
    and of a factory's environment alike (``gymnasium.wrappers.TimeLimit``; a limit of the
    factory's own still applies, so the shorter one wins). An environment without any time limit
    is refused: an episode that never ends would stall training.
    """
    if max_episode_steps is not None:
        require_int(max_episode_steps, "max_episode_steps", 1)
    if isinstance(env, str):
        base = gym.make(env, max_episode_steps=max_episode_steps)
    elif callable(env):
        base = env()
        if not isinstance(base, gym.Env):
            raise TypeError(
                f"`env` must return a gymnasium.Env when called, got {type(base).__name__}."
            )
        if max_episode_steps is not None:
            base = gym.wrappers.TimeLimit(base, max_episode_steps)
    else:
        raise TypeError(
            f"`env` must be a gymnasium id (str) or a factory returning an environment, got "
            f"{type(env).__name__}."
        )
    if not isinstance(base.action_space, spaces.Discrete):
        raise TypeError(
            f"AsymmetricActorCritic needs a Discrete action space, got {base.action_space}."
        )
    if not isinstance(base.observation_space, spaces.Box):
        raise TypeError(
            f"AsymmetricActorCritic needs a Box observation space, got {base.observation_space}; "
            "one-hot encode a Discrete one with gymnasium.wrappers.FlattenObservation, or use "
            "LinearAsymmetricActorCritic for a tabular POMDP."
        )
    if not _has_time_limit(base):
        raise ValueError(
            f"The environment {base} has no time limit, so an episode may never end; pass "
            "max_episode_steps (or wrap the environment in gymnasium.wrappers.TimeLimit)."
        )
    partial = _FullState(base) if keep is None else PartialObservation(base, keep)
    return ObservationWindow(partial, window)


def _has_time_limit(env: gym.Env) -> bool:
    """Whether ``env`` or a wrapper inside it is a ``TimeLimit``."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            return True
        env = env.env
    return False


@dataclass(frozen=True)
class A2COptions:
    """The advantage actor-critic (A2C) settings of one training step of
    :class:`AsymmetricActorCritic`: the episodes it collects, the m-step return targets and the
    entropy bonus of its losses (module docstring), and its Adam step.

    Args:
        num_envs: episodes collected per training step.
        gamma: discount factor in ``[0, 1]`` (1: undiscounted episodic returns).
        td_steps: ``m`` of the m-step return.
        entropy_coef: ``c_H``.
        actor_lr, critic_lr: the Adam learning rates of the actor and of the critic.
    """

    num_envs: int = 8
    gamma: float = 0.99
    td_steps: int = 8
    entropy_coef: float = 0.01
    actor_lr: float = 3e-3
    critic_lr: float = 3e-3

    def __post_init__(self) -> None:
        require_int(self.num_envs, "a2c.num_envs", 1)
        require_int(self.td_steps, "a2c.td_steps", 1)
        checked = {
            "gamma": require_probability(self.gamma, "a2c.gamma"),
            "entropy_coef": require_non_negative(self.entropy_coef, "a2c.entropy_coef"),
            "actor_lr": require_positive(self.actor_lr, "a2c.actor_lr"),
            "critic_lr": require_positive(self.critic_lr, "a2c.critic_lr"),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)


# the options live in checkpoints' hyperparameters, which torch.load reads weights-only
torch.serialization.add_safe_globals([A2COptions])


class AsymmetricActorCritic(pl.LightningModule):
    """Advantage actor-critic with an asymmetric ``V(s, z)`` or symmetric ``V(z)`` critic.

    Args:
        env: a gymnasium id (``"CartPole-v1"``) or a factory returning an environment with a
            ``Box`` observation and ``Discrete`` actions, and a time limit (its own or
            ``max_episode_steps``). A factory's environment may report its own privileged
            ``info["state"]`` when ``keep`` is ``None``. Rewards, observations and states must
            be finite: each step's are checked on the host, where ``env.step`` returns them.
        keep: observation coordinates the agent sees (``[0, 2]`` hides CartPole's velocities);
            ``None`` shows all of them.
        window: agent state = the last ``window`` observations.
        asymmetric: give the critic the privileged state as well.
        max_episode_steps: time limit of the episodes, of a gymnasium id or a factory's
            environment (truncation, bootstrapped).
        actor: maps the flattened agent state ``(N, window * obs)`` to action logits
            ``(N, A)``; ``None`` builds a Tanh MLP with two hidden layers of width ``hidden``.
        critic: maps ``[s, z]`` flattened, ``(N, state + window * obs)`` (asymmetric), or ``z``
            alone (symmetric) to values ``(N, 1)``; ``None`` builds the Tanh MLP as for the actor.
            The widths an injected network must take are checked on one probe observation.
        hidden: width of the default networks' two hidden layers.
        a2c: the episodes, return targets, entropy bonus and learning rates of a step.
        eval_episodes: episodes of ``trainer.test`` (``test/return``), greedy actions.
        steps_per_epoch: length of the step-counting train dataloader.
        seed: seeds the default networks, the environments and the action draws.
    """

    def __init__(
        self,
        env: str | EnvFactory = "CartPole-v1",
        keep: Sequence[int] | None = None,
        window: int = 1,
        asymmetric: bool = True,
        max_episode_steps: int | None = None,
        actor: nn.Module | None = None,
        critic: nn.Module | None = None,
        hidden: int = 64,
        a2c: A2COptions = A2COptions(),
        eval_episodes: int = 20,
        steps_per_epoch: int = 20,
        seed: int = 0,
    ) -> None:
        super().__init__()
        ignore = ["actor", "critic"] + ([] if isinstance(env, str) else ["env"])
        self.save_hyperparameters(ignore=ignore)
        self.automatic_optimization = False
        self.env = env
        self.keep = None if keep is None else require_indices(keep, "keep").tolist()
        self.window = require_int(window, "window", 1)
        asymmetric = require_bool(asymmetric, "asymmetric")
        self.asymmetric = bool(asymmetric)
        self.max_episode_steps = (
            None
            if max_episode_steps is None
            else require_int(max_episode_steps, "max_episode_steps", 1)
        )
        if not isinstance(a2c, A2COptions):
            raise TypeError(f"`a2c` must be an A2COptions, got {type(a2c).__name__}.")
        self.a2c = a2c
        self.eval_episodes = require_int(eval_episodes, "eval_episodes", 1)
        self.steps_per_epoch = require_int(steps_per_epoch, "steps_per_epoch", 1)
        self.seed = require_int(seed, "seed", 0)
        hidden = require_int(hidden, "hidden", 1)

        probe = self.make_env()  # fails here, before training, on an unsuitable environment
        observation, info = probe.reset(seed=0)
        agent_dim = int(np.asarray(observation, dtype=np.float32).size)
        state_dim = int(np.asarray(info["state"], dtype=np.float32).size)
        self.num_actions = int(probe.action_space.n)
        probe.close()
        critic_dim = agent_dim + (state_dim if self.asymmetric else 0)
        for name, network, inputs, outputs in (
            ("actor", actor, agent_dim, self.num_actions),
            ("critic", critic, critic_dim, 1),
        ):
            if network is not None:
                _check_network(network, name, inputs, outputs)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.actor = _mlp(agent_dim, hidden, self.num_actions) if actor is None else actor
            self.critic = _mlp(critic_dim, hidden, 1) if critic is None else critic
        self.register_buffer("iteration", torch.zeros((), dtype=torch.long))

    def make_env(self) -> gym.Env:
        """One agent environment (masked, windowed, with ``info["state"]``)."""
        return make_agent_env(self.env, self.keep, self.window, self.max_episode_steps)

    # ---------------------------------------------------------------- networks

    def policy_logits(self, agent_state: Tensor) -> Tensor:
        return self.actor(agent_state.flatten(1))

    def value(self, state: Tensor, agent_state: Tensor) -> Tensor:
        """``V(s, z)`` (asymmetric) or ``V(z)`` (symmetric), shape ``(N,)``."""
        z = agent_state.flatten(1)
        x = torch.cat([state.flatten(1), z], dim=1) if self.asymmetric else z
        return self.critic(x).squeeze(-1)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """One Adam with a parameter group each, so ``global_step`` counts training steps."""
        return torch.optim.Adam(
            [
                {"params": self.actor.parameters(), "lr": self.a2c.actor_lr},
                {"params": self.critic.parameters(), "lr": self.a2c.critic_lr},
            ]
        )

    def train_dataloader(self) -> DataLoader:
        """Yields ``steps_per_epoch`` step indices; the episodes are collected in the step."""
        return ResumableDataLoader(
            range(self.steps_per_epoch), trainer=self.trainer, batch_size=None
        )

    def test_dataloader(self) -> DataLoader:
        """Yields the indices of the ``eval_episodes`` test episodes."""
        return DataLoader(range(self.eval_episodes), batch_size=None)

    # ---------------------------------------------------------------- rollouts

    def _seeds(self, stream: int, key: int, count: int) -> list[int]:
        entropy = [self.seed, stream, key, self.global_rank]
        return [int(s) for s in np.random.SeedSequence(entropy).generate_state(count)]

    def collect_episodes(self, seeds: Sequence[int], generator: torch.Generator | None) -> dict:
        """Run one episode per seed in lockstep; sample actions (``generator``) or act greedily.

        Returns time-major tensors ``(T, E, ...)``: ``state``, ``agent_state``, ``action``,
        ``reward``, ``terminated``, ``truncated``, ``alive`` (the episode was running at ``t``),
        and ``next_state`` / ``next_agent_state`` (after the step), plus ``returns`` ``(E,)``.

        Raises ``ValueError`` at the first NaN or infinite reward, observation or state the
        environments return; the check runs on the host arrays ``env.step`` returns, before they
        reach the device, so it costs no device synchronisation.
        """
        envs = [self.make_env() for _ in seeds]
        steps: list[dict[str, Tensor]] = []
        current = [env.reset(seed=seed) for env, seed in zip(envs, seeds)]
        alive = np.ones(len(envs), dtype=bool)
        returns = np.zeros(len(envs))
        while alive.any():
            z = _stack([obs for obs, _ in current], self.device, "observation")
            s = _stack([info["state"] for _, info in current], self.device, 'info["state"]')
            with torch.no_grad():
                logits = self.policy_logits(z)
            if generator is None:
                actions = logits.argmax(1)
            else:
                probs = logits.softmax(1).cpu()
                actions = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            record = {
                "state": s,
                "agent_state": z,
                "action": actions.to(self.device),
                "alive": torch.tensor(alive, device=self.device),  # a copy: `alive` changes below
            }
            rewards, terminated, truncated, nxt = [], [], [], []
            for i, env in enumerate(envs):
                if not alive[i]:
                    rewards.append(0.0)
                    terminated.append(False)
                    truncated.append(False)
                    nxt.append(current[i])
                    continue
                obs, reward, term, trunc, info = env.step(int(actions[i]))
                reward = float(reward)
                if not math.isfinite(reward):
                    raise ValueError(
                        f"The environment of seed {seeds[i]} returned the reward {reward} at step "
                        f"{len(steps)}; rewards must be finite: fix the environment or wrap it "
                        "(gymnasium.wrappers.TransformReward) to map such rewards to numbers."
                    )
                returns[i] += reward
                rewards.append(reward)
                terminated.append(bool(term))
                truncated.append(bool(trunc))
                nxt.append((obs, info))
                alive[i] = not (term or trunc)
            record["reward"] = torch.tensor(rewards, device=self.device)
            record["terminated"] = torch.tensor(terminated, device=self.device)
            record["truncated"] = torch.tensor(truncated, device=self.device)
            record["next_agent_state"] = _stack([obs for obs, _ in nxt], self.device, "observation")
            record["next_state"] = _stack(
                [info["state"] for _, info in nxt], self.device, 'info["state"]'
            )
            steps.append(record)
            current = nxt
        for env in envs:
            env.close()
        rollout = {key: torch.stack([r[key] for r in steps]) for key in steps[0]}
        rollout["returns"] = torch.tensor(returns, device=self.device, dtype=torch.float32)
        return rollout

    # ---------------------------------------------------------------- training

    def training_step(self, batch: Any, batch_idx: int) -> None:
        step = int(self.iteration)
        seeds = self._seeds(_TRAIN_STREAM, step, self.a2c.num_envs + 1)
        generator = torch.Generator().manual_seed(seeds[-1])
        rollout = self.collect_episodes(seeds[:-1], generator)
        losses = self.losses(rollout)
        optimizer = self.optimizers()
        optimizer.zero_grad()
        # the actor and the critic share no parameters: one backward gives both gradients
        self.manual_backward(losses["actor"] + losses["critic"])
        optimizer.step()
        self.iteration += 1
        self.log("train/return", rollout["returns"].mean(), prog_bar=True, sync_dist=True)
        self.log("train/critic_loss", losses["critic"].detach(), sync_dist=True)
        self.log("train/entropy", losses["entropy"].detach(), sync_dist=True)

    def losses(self, rollout: dict[str, Tensor]) -> dict[str, Tensor]:
        """``L_pi``, ``L_V`` and the mean entropy of the module docstring on one rollout."""
        T, E = rollout["reward"].shape
        flat = lambda key: rollout[key].flatten(0, 1)  # noqa: E731
        values = self.value(flat("state"), flat("agent_state")).view(T, E)
        with torch.no_grad():
            next_values = self.value(flat("next_state"), flat("next_agent_state")).view(T, E)
        targets = m_step_returns(
            rollout["reward"],
            next_values,
            rollout["terminated"],
            rollout["truncated"],
            self.a2c.gamma,
            self.a2c.td_steps,
            validate_args=False,  # the rewards were checked as the environments returned them
        )
        mask = rollout["alive"].float()
        count = mask.sum()
        logits = self.policy_logits(flat("agent_state")).view(T, E, -1)
        log_probs = logits.log_softmax(-1)
        chosen = log_probs.gather(-1, rollout["action"].unsqueeze(-1)).squeeze(-1)
        entropy = -(log_probs.exp() * log_probs).sum(-1)
        advantage = (targets - values).detach()
        critic = ((values - targets) ** 2 * mask).sum() / count
        mean_entropy = (entropy * mask).sum() / count
        actor = -(chosen * advantage * mask).sum() / count - self.a2c.entropy_coef * mean_entropy
        return {"actor": actor, "critic": critic, "entropy": mean_entropy}

    # ---------------------------------------------------------------- evaluation

    def test_step(self, batch: Any, batch_idx: int) -> None:
        (seed,) = self._seeds(_TEST_STREAM, int(batch), 1)
        rollout = self.collect_episodes([seed], generator=None)
        self.log("test/return", rollout["returns"].mean(), batch_size=1, sync_dist=True)


def m_step_returns(
    rewards: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    gamma: float,
    m: int,
    *,
    validate_args: bool = True,
) -> Tensor:
    """m-step returns ``G_t = sum_{i<m'} gamma^i r_{t+i} + gamma^{m'} V_{t+m'}``, time-major.

    ``next_values[t]`` is the value of the state reached by step ``t``. The sum stops after ``m``
    steps, at the last step ``T - 1``, or at the end of the episode; it bootstraps with
    ``gamma * next_values`` of its last step unless that step terminated the episode.
    Entries after an episode's end are ignored by the caller (zero rewards there are harmless).
    All four tensors are ``(T, E)``; the two flags are boolean, ``gamma`` lies in ``[0, 1]``
    and ``m >= 1``. With ``validate_args`` (the default) NaN or infinite ``rewards`` and
    ``next_values`` are refused, at the cost of one synchronising reduction each; a caller whose
    values are checked already (the training step) passes ``False``.
    """
    m = require_int(m, "m", 1)
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma <= 1:
        raise ValueError(f"`gamma` must be a discount factor in [0, 1], got {gamma!r}.")
    tensors = {
        "rewards": rewards,
        "next_values": next_values,
        "terminated": terminated,
        "truncated": truncated,
    }
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if rewards.dim() != 2 or len(set(shapes.values())) != 1:
        listed = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(
            f"`rewards`, `next_values`, `terminated` and `truncated` must share one (T, E) "
            f"shape, got {listed}; stack them time-major, one column per episode."
        )
    for name in ("terminated", "truncated"):
        if tensors[name].dtype != torch.bool:
            raise TypeError(
                f"`{name}` must be a boolean tensor, got dtype {tensors[name].dtype}; "
                f"pass `{name}.bool()`."
            )
    if validate_args:
        require_finite_tensor(rewards, "rewards")
        require_finite_tensor(next_values, "next_values")
    T = rewards.shape[0]
    time = torch.arange(T, device=rewards.device)
    total = torch.zeros_like(rewards)
    discount = torch.ones_like(rewards)
    running = torch.ones_like(rewards, dtype=torch.bool)
    for i in range(m):
        index = (time + i).clamp(max=T - 1)
        valid = running & (time + i < T).unsqueeze(-1)
        total = total + torch.where(valid, discount * rewards[index], 0.0)
        ends = terminated[index] | truncated[index]
        last = valid & (ends | (time + i == T - 1).unsqueeze(-1) | (i == m - 1))
        bootstrap = last & ~terminated[index]
        total = total + torch.where(bootstrap, discount * gamma * next_values[index], 0.0)
        discount = discount * gamma
        running = valid & ~last
    return total


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(inputs, hidden),
        nn.Tanh(),
        nn.Linear(hidden, hidden),
        nn.Tanh(),
        nn.Linear(hidden, outputs),
    )


def _check_network(network: nn.Module, name: str, inputs: int, outputs: int) -> None:
    """Raise unless ``network`` maps ``(1, inputs)`` to ``(1, outputs)`` (run in eval mode)."""
    if not isinstance(network, nn.Module):
        raise TypeError(f"`{name}` must be an nn.Module, got {type(network).__name__}.")
    parameter = next(network.parameters(), None)
    probe = torch.zeros(1, inputs, dtype=torch.float32 if parameter is None else parameter.dtype)
    was_training = network.training
    network.eval()
    try:
        with torch.no_grad():
            shape = tuple(network(probe).shape)
    except RuntimeError as error:
        raise ValueError(
            f"`{name}` must take inputs of width {inputs} for this environment: {error}"
        ) from error
    finally:
        network.train(was_training)
    if shape != (1, outputs):
        raise ValueError(f"`{name}` must give {outputs} output(s) per row, got shape {shape}.")


def _stack(arrays: Sequence[Any], device: torch.device, name: str) -> Tensor:
    """The host arrays as one float32 tensor on ``device``; raises on NaN or infinity."""
    stacked = np.stack([np.asarray(a, dtype=np.float32) for a in arrays])
    if not np.isfinite(stacked).all():
        raise ValueError(
            f"The environment returned a NaN or infinite {name}; observations and states must "
            "be finite: fix the environment or wrap it (gymnasium.wrappers.TransformObservation)."
        )
    return torch.as_tensor(stacked, device=device)


__all__ = ["A2COptions", "AsymmetricActorCritic", "m_step_returns", "make_agent_env"]
