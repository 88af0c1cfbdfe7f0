"""Image encoders: the small ConvNet, a Hugging Face vision model loaded from a local folder, and
a plain backbone module, each giving one vector per image of width ``out_dim``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lightning_info.methods.graph4mm.encoders import (
    PretrainedImageEncoder,
    SmallConvEncoder,
    image_encoder,
)
from tests.methods.graph4mm import tiny


@pytest.fixture(scope="module")
def vit_folder(tmp_path_factory):
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(
        image_size=8,
        patch_size=4,
        num_channels=1,
        hidden_size=12,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=24,
    )
    folder = tmp_path_factory.mktemp("vit")
    torch.manual_seed(0)
    ViTModel(config).save_pretrained(folder)
    return folder


def test_the_small_convnet_maps_images_to_vectors():
    encoder = image_encoder(None, in_channels=3, dim=10)
    assert isinstance(encoder, SmallConvEncoder) and encoder.out_dim == 10
    assert encoder(torch.rand(4, 3, 8, 8)).shape == (4, 10)
    assert encoder(torch.rand(2, 3, 28, 28)).shape == (2, 10)  # pooled to a 4 x 4 grid


def test_a_hugging_face_model_by_folder_gives_its_pooled_output(vit_folder):
    from transformers import ViTModel

    encoder = image_encoder(str(vit_folder))
    reference = ViTModel.from_pretrained(vit_folder).eval()
    images = torch.rand(3, 1, 8, 8)
    assert encoder.out_dim == 12
    with torch.no_grad():
        torch.testing.assert_close(encoder(images), reference(pixel_values=images).pooler_output)
    encoder.train()
    assert not encoder.model.training and not any(p.requires_grad for p in encoder.parameters())
    trainable = image_encoder(str(vit_folder), frozen=False)
    assert all(p.requires_grad for p in trainable.parameters())


def test_graph4mm_trains_around_a_frozen_pretrained_encoder(vit_folder):
    model = tiny.module(image_encoder=str(vit_folder))
    batch = tiny.data().collate(tiny.data().train_graphs[:3])
    loss = model._losses(batch)[0]
    loss.backward()
    assert model.qformer.image_in[0].weight.shape[1] == 12
    assert all(p.grad is None for p in model.image_encoder.parameters())
    assert model.qformer.queries.grad is not None


def test_a_plain_backbone_module_is_wrapped_with_its_feature_width():
    class Backbone(nn.Module):  # as timm models are: ``num_features``, features from forward
        num_features = 5

        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 5))

        def forward(self, images):
            return self.net(images)

    encoder = image_encoder(Backbone())
    assert isinstance(encoder, PretrainedImageEncoder) and encoder.out_dim == 5
    assert encoder(torch.rand(2, 1, 8, 8)).shape == (2, 5)
    with pytest.raises(ValueError, match="out_dim"):
        PretrainedImageEncoder(nn.Linear(3, 4))
    with pytest.raises(TypeError, match="image_encoder"):
        image_encoder(3)
