"""The pool of adversarially trained networks that ROME distils against."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_info.methods.rome.network import trainable


class NetworkPool(nn.Module):
    """A first-in-first-out pool of networks, each with a persistent optimizer and a running
    accuracy, as the reference keeps them (``net_list``, ``optimizer_list``, ``acc_meters``).

    Every network trains with its own SGD (``lr``, ``momentum``, ``weight_decay``; the
    reference's ``--net_decay`` settings are 0.01, 0.9 and 5e-4), whose momentum survives
    between the rounds in which the network is picked. Its running accuracy counts the correct
    predictions on its own training batches since the last :meth:`reset_accuracies`; it is
    ``acc_net`` of ROME's performance term, 0 for a network that has not trained yet. The count
    of correct predictions stays on the device (a training step reads nothing back); it is read
    on the host only where it leaves the pool: in :meth:`checkpoint_state` and
    :meth:`broadcast`. The weights are submodules (in the state dict); the optimizer states and
    the counts travel through :meth:`checkpoint_state` and :meth:`load_checkpoint_state`.
    """

    def __init__(self, max_size: int, lr: float, momentum: float, weight_decay: float) -> None:
        super().__init__()
        self.max_size = max_size
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.nets = nn.ModuleList()
        self._members: list[_Member] = []

    def __len__(self) -> int:
        return len(self.nets)

    def __getitem__(self, index: int) -> nn.Module:
        return self.nets[index]

    def add(self, net: nn.Module) -> None:
        """Append ``net`` with a fresh optimizer; past ``max_size`` the oldest network leaves."""
        optimizer = torch.optim.SGD(
            net.parameters(), lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay
        )
        self.nets.append(net)
        self._members.append(_Member(optimizer))
        while len(self.nets) > self.max_size:
            del self.nets[0]
            del self._members[0]

    def replace(self, nets: Iterable[nn.Module]) -> None:
        """Empty the pool and add ``nets`` (e.g. rebuilt to a checkpoint's size)."""
        self.nets = nn.ModuleList()
        self._members = []
        for net in nets:
            self.add(net)

    def running_accuracy(self, index: int) -> Tensor:
        """Network ``index``'s accuracy on its training batches since the last reset, or 0: a
        0-dim float64 tensor, ``correct / seen``, on the device of the count."""
        member = self._members[index]
        if not member.seen:
            return torch.zeros((), dtype=torch.float64)
        return torch.as_tensor(member.correct, dtype=torch.float64) / member.seen

    def reset_accuracies(self) -> None:
        for member in self._members:
            member.correct = member.seen = 0

    def train_step(self, index: int, x: Tensor, y: Tensor) -> None:
        """One optimizer step of network ``index`` on ``CE(net(x), y)``, counted in its running
        accuracy."""
        net, member = self.nets[index], self._members[index]
        with trainable(net):
            logits = net(x)
            member.optimizer.zero_grad()
            F.cross_entropy(logits, y).backward()
            member.optimizer.step()
        member.correct = member.correct + (logits.argmax(1) == y).sum()
        member.seen += y.shape[0]

    def broadcast(self, index: int, strategy: Any) -> None:
        """Give every process rank 0's network ``index``: weights, optimizer state, counts."""
        net, member = self.nets[index], self._members[index]
        weights, optimizer, counts = strategy.broadcast(
            (net.state_dict(), member.optimizer.state_dict(), member.counts()), src=0
        )
        net.load_state_dict(weights)
        member.load(optimizer, counts)

    def checkpoint_state(self) -> list[dict[str, Any]]:
        """Each network's optimizer state and counts, oldest first."""
        return [
            {"optimizer": m.optimizer.state_dict(), "counts": m.counts()} for m in self._members
        ]

    def load_checkpoint_state(self, saved: list[dict[str, Any]]) -> None:
        if len(saved) != len(self._members):
            raise ValueError(
                f"the checkpoint holds the state of {len(saved)} pool networks for a pool of "
                f"{len(self._members)}."
            )
        for member, state in zip(self._members, saved):
            member.load(state["optimizer"], state["counts"])


class _Member:
    """A pool network's optimizer and its running-accuracy counts."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        self.correct: int | Tensor = 0  # a device tensor once the network has trained
        self.seen = 0

    def counts(self) -> tuple[int, int]:
        """``(correct, seen)`` as ints: one host read of the count."""
        return int(self.correct), self.seen

    def load(self, optimizer_state: dict[str, Any], counts: tuple[int, int]) -> None:
        self.optimizer.load_state_dict(optimizer_state)
        self.correct, self.seen = int(counts[0]), int(counts[1])
