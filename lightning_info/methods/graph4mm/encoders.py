"""Image encoders for Graph4MM: one feature vector per image.

``SmallConvEncoder`` is trained with the rest of the model (the offline default, sized for 8x8
digits). :func:`image_encoder` also wraps a Hugging Face vision model given by name or local
folder (``transformers.AutoModel``; its pooled output, else the mean of its last hidden states)
or any ``nn.Module`` mapping ``(B, C, H, W)`` images to ``(B, D)`` features (e.g. a timm model
built with ``num_classes=0``); the wrapped module's ``out_dim`` is the feature width.
"""

from __future__ import annotations

from torch import Tensor, nn

from lightning_info.core.validation import require_bool, require_int, require_real_floating

__all__ = ["PretrainedImageEncoder", "SmallConvEncoder", "image_encoder"]


class SmallConvEncoder(nn.Module):
    """Two 3x3 convolutions with GELU (the second with stride 2), pooled to a 4x4 grid, then a
    linear layer and LayerNorm: ``(B, C, H, W) -> (B, dim)``. The grid keeps where strokes are
    (a global average pool would keep only which local patterns occur, too little to tell
    digits apart)."""

    def __init__(self, in_channels: int = 1, dim: int = 64, channels: int = 32):
        super().__init__()
        self.out_dim = require_int(dim, "dim", 1)
        in_channels = require_int(in_channels, "in_channels", 1)
        channels = require_int(channels, "channels", 1)
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, channels // 2 or 1, 3, padding=1),
            nn.GELU(),
            nn.Conv2d(channels // 2 or 1, channels, 3, padding=1, stride=2),
            nn.GELU(),
            nn.AdaptiveAvgPool2d(4),
            nn.Flatten(),
            nn.Linear(16 * channels, dim),
            nn.LayerNorm(dim),
        )

    def forward(self, images: Tensor) -> Tensor:
        return self.net(require_real_floating(images, "images"))


class PretrainedImageEncoder(nn.Module):
    """A vision backbone's features: a Hugging Face model's ``pooler_output`` (else its mean
    last hidden state) or a plain module's output; ``out_dim`` read from its config or passed.
    ``frozen``: its weights do not train and it runs in eval mode."""

    def __init__(self, model: nn.Module, out_dim: int | None = None, frozen: bool = True):
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"`model` must be an nn.Module, got {type(model).__name__}; pass a model name "
                "to image_encoder() to load it."
            )
        if out_dim is not None:
            out_dim = require_int(out_dim, "out_dim", 1)
        frozen = require_bool(frozen, "frozen")
        self.model = model
        config = getattr(model, "config", None)
        width = out_dim or getattr(config, "hidden_size", None)
        width = width or getattr(model, "num_features", None)
        width = width or (config.hidden_sizes[-1] if hasattr(config, "hidden_sizes") else None)
        if width is None:
            raise ValueError("cannot read the image encoder's feature width: pass out_dim")
        self.out_dim = int(width)
        self.frozen = frozen
        if frozen:
            model.requires_grad_(False)

    def train(self, mode: bool = True) -> PretrainedImageEncoder:
        super().train(mode)
        if self.frozen:
            self.model.eval()
        return self

    def forward(self, images: Tensor) -> Tensor:
        if getattr(self.model, "config", None) is None:
            return self.model(images)
        output = self.model(pixel_values=images)
        pooled = getattr(output, "pooler_output", None)
        if pooled is not None:
            return pooled.flatten(1)
        hidden = output.last_hidden_state  # (B, tokens, D), or (B, D, h, w) for conv nets
        return hidden.flatten(2).mean(-1) if hidden.dim() == 4 else hidden.mean(1)


def image_encoder(
    spec: nn.Module | str | None, in_channels: int = 1, dim: int = 64, frozen: bool = True
) -> nn.Module:
    """``None``: a :class:`SmallConvEncoder` (trained); a string: a Hugging Face vision model
    by name or local folder (``AutoModel.from_pretrained``); a module: wrapped as is. The
    result has ``out_dim``."""
    require_bool(frozen, "frozen")
    if spec is None:
        return SmallConvEncoder(in_channels, dim)
    if isinstance(spec, str):
        from transformers import AutoModel

        return PretrainedImageEncoder(AutoModel.from_pretrained(spec), frozen=frozen)
    if isinstance(spec, nn.Module):
        if hasattr(spec, "out_dim") and not hasattr(spec, "config"):
            return spec
        return PretrainedImageEncoder(spec, frozen=frozen)
    raise TypeError(f"image_encoder must be None, a model name or an nn.Module, got {spec!r}")
