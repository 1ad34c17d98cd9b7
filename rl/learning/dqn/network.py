"""The shared per-row network (Decima's shape, STYLE.md item 8) and its export.

`RowMLP` maps each candidate's feature row to one number with the same weights for every row:
`(batch, candidates, width) → (batch, candidates)`. A node's output therefore depends only on
its own row (its features and the pod's), never on the other candidates or their order, and one
model serves clusters of any size. Inputs are standardized by `mean`/`scale`, fixed before
training from the demonstration rows and exported with the weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from torch import nn

from scheduler.learning.numpy_model import save_numpy_model

MIN_SCALE = 1e-3  # a feature that never varies in the demonstrations is left unscaled


class RowMLP(nn.Module):
    mean: torch.Tensor
    scale: torch.Tensor

    def __init__(self, width: int, hidden: int = 64, layers: int = 2) -> None:
        super().__init__()
        sizes = [width] + [hidden] * layers
        blocks: list[nn.Module] = []
        for a, b in zip(sizes, sizes[1:], strict=False):
            blocks += [nn.Linear(a, b), nn.ReLU()]
        blocks.append(nn.Linear(sizes[-1], 1))
        self.body = nn.Sequential(*blocks)
        self.register_buffer("mean", torch.zeros(width, dtype=torch.float64))
        self.register_buffer("scale", torch.ones(width, dtype=torch.float64))
        self.double()

    def set_standardization(self, rows: np.ndarray) -> None:
        """Fix the input standardization from sample rows (n × width)."""
        mean = rows.mean(axis=0)
        std = rows.std(axis=0)
        self.mean.copy_(torch.as_tensor(mean))
        self.scale.copy_(torch.as_tensor(np.where(std < MIN_SCALE, 1.0, std)))

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        x = (rows - self.mean) / self.scale
        return self.body(x).squeeze(-1)

    def numpy_layers(self) -> list[tuple[np.ndarray, np.ndarray]]:
        linear = [m for m in self.body if isinstance(m, nn.Linear)]
        return [(m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy()) for m in linear]


def masked_argmax(q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per batch row, the index of the best value among the masked-in candidates."""
    return torch.where(mask, q, torch.full_like(q, -torch.inf)).argmax(dim=-1)


def save_checkpoint(
    path: str | Path, net: RowMLP, config: Mapping[str, object], meta: Mapping[str, object]
) -> Path:
    """`path` (.pt: weights, config, metadata) and its .npz sibling for the numpy scorer."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": net.state_dict(), "config": dict(config), "meta": dict(meta)}, out)
    npz = out.with_suffix(".npz")
    save_numpy_model(npz, net.numpy_layers(), net.mean.numpy(), net.scale.numpy(), dict(meta))
    return npz


