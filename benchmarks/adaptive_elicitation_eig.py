"""Expected information gain of every candidate question from a causal LM: all candidates and
answers in one batched evaluation against one forward pass per (candidate, answer).

The model is a randomly initialised GPT-2 (``--width`` 256, ``--layers`` 4, ``--heads`` 4;
trained weights cost the same) over a question bank of ``--questions`` (64) texts "Region r
dark?" with ``--answers`` (4) answer tokens. One entity has answered ``--context`` (5)
questions; the last ``--targets`` (5) questions are the targets and every other unasked question
is a candidate (64 - 5 - 5 = 54 by default). Both ways compute
``EIG(d) = mean_t H[p(Y_t | C)] - sum_y p(y | C, d) mean_t H[p(Y_t | C, (d, y))]``:

- ``batched, shared context``: ``functional.expected_information_gain`` with ``LMPredictive``
  (the default ``share_context=True``): one call for the base context (candidates and targets),
  one for all ``D x A`` extended contexts; each context runs through the model once and its
  question rows continue from its key/value cache, in forward passes of ``--batch-size`` (256)
  rows.
- ``batched, whole rows``: the same two calls with ``share_context=False``: every
  ``(context, question)`` row runs whole, ``D x A x T`` rows padded into passes of
  ``--batch-size``.
- ``per (candidate, answer)``: the same base call, then one forward pass per extended context
  ``C + (d, y)`` holding its ``T`` whole target rows: ``D x A`` passes, as a loop over
  hypothetical answers is written when each simulation is its own model call.

Before timing, the script asserts that the three agree (max abs difference <= 1e-5 nats).
Seconds are the median of ``--repeats`` (3) runs; the ratios are each way's seconds over the
shared-context batched one's. Torch runs with
``--threads`` threads (default 1). ``--quick``: a tiny model, few questions, one repeat.
``--json PATH`` also writes the results with the header (``benchmarks/harness.py``).

Usage::

    python benchmarks/adaptive_elicitation_eig.py [--quick] [--width 256] [--layers 4]
        [--questions 64] [--answers 4] [--context 5] [--targets 5] [--batch-size 256]
        [--threads 1] [--json PATH]
"""

from __future__ import annotations

import argparse
import warnings

import torch
from harness import benchmark_parser, format_ratio, header, median_time, print_header, write_json

from lightning_info.core.logging import markdown_table
from lightning_info.lm.tiny_lm import tiny_causal_lm, train_bpe_tokenizer
from lightning_info.methods.adaptive_elicitation.functional import (
    entropy,
    expected_information_gain,
    target_entropy,
)
from lightning_info.methods.adaptive_elicitation.sequences import LMPredictive, QuestionBank


def parse(args=None) -> argparse.Namespace:
    parser = benchmark_parser(__doc__.split("\n\n")[0], threads=1)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--answers", type=int, default=4)
    parser.add_argument("--context", type=int, default=5)
    parser.add_argument("--targets", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parsed = parser.parse_args(args)
    if parsed.quick:
        parsed.width, parsed.layers, parsed.heads, parsed.questions = 32, 1, 2, 12
        parsed.context, parsed.targets, parsed.repeats = 2, 2, 1
    if parsed.context + parsed.targets >= parsed.questions:
        parser.error("--context + --targets must leave candidates among --questions")
    return parsed


def per_pair_information_gain(lm: LMPredictive, context, candidates, targets) -> torch.Tensor:
    """EIG with one forward pass per extended context ``C + (d, y)``."""
    base = lm.predictive([context], list(candidates) + list(targets))[0]
    answer_p, prior_h = base[: len(candidates)], entropy(base[len(candidates) :]).mean()
    posterior_h = torch.tensor(
        [
            [
                float(target_entropy(lm, [[*context, (d, y)]], targets)[0])
                for y in range(lm.num_answers)
            ]
            for d in candidates
        ],
        dtype=torch.float64,
    )
    return prior_h - (answer_p * posterior_h).sum(-1)


def main(args=None) -> dict:
    options = parse(args)
    if options.threads > 0:
        torch.set_num_threads(options.threads)
    head = header(options)
    warnings.filterwarnings("ignore")
    texts = [f"Region {r} dark?" for r in range(options.questions)]
    tokenizer = train_bpe_tokenizer(texts * 5, vocab_size=400)
    bank = QuestionBank(tokenizer, texts, options.answers)
    model = tiny_causal_lm(
        tokenizer,
        n_layer=options.layers,
        n_embd=options.width,
        n_head=options.heads,
        seed=options.seed,
    )
    lm = LMPredictive(model, bank, batch_size=options.batch_size)
    whole = LMPredictive(model, bank, batch_size=options.batch_size, share_context=False)
    g = torch.Generator().manual_seed(options.seed)
    order = torch.randperm(options.questions - options.targets, generator=g).tolist()
    context = [
        (q, int(torch.randint(options.answers, (1,), generator=g)))
        for q in order[: options.context]
    ]
    targets = list(range(options.questions - options.targets, options.questions))
    candidates = sorted(order[options.context :])
    ways = {
        "shared": lambda: expected_information_gain(lm, context, candidates, targets),
        "whole": lambda: expected_information_gain(whole, context, candidates, targets),
        "per_pair": lambda: per_pair_information_gain(whole, context, candidates, targets),
    }
    values = {name: way() for name, way in ways.items()}
    difference = max(float((values[n] - values["shared"]).abs().max()) for n in values)
    assert difference <= 1e-5, f"the three EIG computations differ by {difference}"
    seconds = {name: median_time(way, options.repeats)[0] for name, way in ways.items()}
    pairs = len(candidates) * options.answers
    names = {
        "shared": "batched, shared context (2 calls)",
        "whole": "batched, whole rows (2 calls)",
        "per_pair": f"per (candidate, answer) ({pairs} passes)",
    }
    rows = [
        [names[n], f"{seconds[n]:.3f} s", format_ratio(seconds[n], seconds["shared"])] for n in ways
    ]
    print_header(head)
    print(
        f"GPT-2 width {options.width}, {options.layers} layers; {len(candidates)} candidates x "
        f"{options.answers} answers x {options.targets} targets, context {options.context}, "
        f"batch {options.batch_size}, {options.threads} thread(s); max |diff| {difference:.1e}"
    )
    print(markdown_table(["EIG of all candidates", "seconds", "vs shared context"], rows))
    result = {
        "seconds": seconds,
        "speedup": {n: seconds[n] / seconds["shared"] for n in ("whole", "per_pair")},
        "max_difference": difference,
        "candidates": len(candidates),
        "options": vars(options),
    }
    if options.json:
        write_json(options.json, head, result)
    return result


if __name__ == "__main__":
    main()
