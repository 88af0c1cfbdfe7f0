import pytest
import torch

from lab.prism.study import PrismStudy, train_tiny_lm
from lightning_info.lm.tiny_lm import train_bpe_tokenizer
from lightning_info.methods.prism.fragments import record_texts, synthetic_records


def test_a_shared_base_is_copied_and_fine_tuned_never_modified(tmp_path):
    records = synthetic_records(8, seed=0)
    tokenizer = train_bpe_tokenizer([t for r in records for t in record_texts(r)], vocab_size=500)
    study = PrismStudy(layers=1, width=16, batch_size=8, lr=1e-9, seeds=[0])
    base = train_tiny_lm(records[:4], tokenizer, 1, study, 5, str(tmp_path))
    before = {k: v.clone() for k, v in base.state_dict().items()}
    tuned = train_tiny_lm(records[4:], tokenizer, 1, study, 0, str(tmp_path), start=base)
    scratch = train_tiny_lm(records[4:], tokenizer, 1, study, 0, str(tmp_path))
    assert tuned is not base
    for name, value in base.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=0)  # the base is untouched
        # lr 1e-9: the fine-tuned copy starts from the base, the scratch model does not
        torch.testing.assert_close(tuned.state_dict()[name], value, rtol=0, atol=1e-6)
    differs = [
        not torch.allclose(scratch.state_dict()[n], v)
        for n, v in base.state_dict().items()
        if v.dim() == 2  # the random matrices (biases and norms start at 0 and 1)
    ]
    assert all(differs)


def test_study_options_are_checked():
    with pytest.raises(ValueError, match="base"):
        PrismStudy(base="pretrained")
    with pytest.raises(ValueError, match="seeds"):
        PrismStudy(seeds=[])
