"""Seeded DocRED-format documents for tests and the default recipe (no document-level relation
extraction set ships in a package).

A *world* (``world_seed``) holds people, cities, countries and organisations, and its facts:
birthplace (P19), the city's country (P17), employer (P108), the organisation's headquarters
(P159), spouse (P26, both directions) and, inferred from birthplace and country, citizenship
(P27). A document (``seed``) tells the facts of a few of the world's people in sentences:

- a person is named in full once and by surname afterwards: two mentions of one entity, so a
  fact told with the surname needs coreference;
- citizenship is never stated: it follows from the birthplace sentence and the city's country
  sentence, a cross-sentence relation with two evidence sentences;
- distractor sentences name cities a person visited (no relation) and entities with no fact.

Splits drawn from one world share facts, so some dev facts are training facts and Ign F1
differs from F1. ``RELATIONS`` is the ``rel_info`` of the generated documents.
"""

from __future__ import annotations

import random
from typing import Any

from lightning_info.core.validation import require_int

__all__ = ["RELATIONS", "synthetic_docred"]

RELATIONS = {
    "P17": "country",
    "P19": "place of birth",
    "P26": "spouse",
    "P27": "country of citizenship",
    "P108": "employer",
    "P159": "headquarters location",
}

_SYLLABLES = ["ka", "lo", "mi", "ra", "te", "no", "vi", "sa", "du", "re", "po", "li", "ma", "zo"]


def _names(rng: random.Random, count: int, parts: int, taken: set[str], suffix: str = ""):
    """``count`` new names, none in ``taken`` (which then holds them too)."""
    names: list[str] = []
    while len(names) < count:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(parts)).capitalize() + suffix
        if word not in taken:
            taken.add(word)
            names.append(word)
    return names


class _World:
    def __init__(self, seed: int, people: int) -> None:
        rng, taken = random.Random(seed), set()
        self.countries = _names(rng, 8, 3, taken, "ia")
        self.cities = _names(rng, 60, 3, taken)
        self.orgs = _names(rng, 40, 2, taken, "corp")
        first, last = _names(rng, people, 3, taken), _names(rng, people, 3, taken)
        self.people = [f"{a} {b}" for a, b in zip(first, last)]
        self.country_of = {c: rng.choice(self.countries) for c in self.cities}
        self.headquarters = {o: rng.choice(self.cities) for o in self.orgs}
        self.birthplace = {p: rng.choice(self.cities) for p in self.people}
        self.employer = {p: rng.choice(self.orgs) for p in self.people}
        order = rng.sample(self.people, people)
        self.spouse = {}
        for a, b in zip(order[0::4], order[1::4]):  # half the people are married couples
            self.spouse[a], self.spouse[b] = b, a


class _Document:
    """Sentences and entities of one document under construction."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.sents: list[list[str]] = []
        self.entities: dict[str, int] = {}
        self.vertex_set: list[list[dict[str, Any]]] = []
        self.types: dict[str, str] = {}
        self.labels: list[dict[str, Any]] = []
        self.named_in_full: set[str] = set()

    def sentence(self, parts: list[tuple[str, str | None]]) -> int:
        """Add a sentence of text pieces; a piece with an entity key is a mention of it."""
        tokens: list[str] = []
        sent = len(self.sents)
        for text, entity in parts:
            words = text.split()
            if entity is not None:
                self._mention(entity, text, sent, len(tokens), len(tokens) + len(words))
            tokens.extend(words)
        self.sents.append([*tokens, "."])
        return sent

    def _mention(self, entity: str, text: str, sent: int, start: int, end: int) -> None:
        if entity not in self.entities:
            self.entities[entity] = len(self.vertex_set)
            self.vertex_set.append([])
        mention = {"name": text, "sent_id": sent, "pos": [start, end], "type": self.types[entity]}
        self.vertex_set[self.entities[entity]].append(mention)

    def person(self, name: str) -> tuple[str, str]:
        """The person's mention text: the full name first, the surname afterwards."""
        if name in self.named_in_full:
            return name.split()[-1], name
        self.named_in_full.add(name)
        return name, name

    def label(self, head: str, tail: str, relation: str, evidence: list[int]) -> None:
        self.labels.append(
            {
                "h": self.entities[head],
                "t": self.entities[tail],
                "r": relation,
                "evidence": sorted(set(evidence)),
            }
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "sents": self.sents,
            "vertexSet": self.vertex_set,
            "labels": self.labels,
        }


def _tell(doc: _Document, world: _World, person: str, rng: random.Random) -> None:
    doc.types.update({person: "PER"})
    city, org = world.birthplace[person], world.employer[person]
    country = world.country_of[city]
    doc.types.update({city: "LOC", country: "LOC", org: "ORG"})
    born = doc.sentence([doc.person(person), ("was born in", None), (city, city)])
    doc.label(person, city, "P19", [born])
    located = doc.sentence([(city, city), ("is a city in", None), (country, country)])
    doc.label(city, country, "P17", [located])
    doc.label(person, country, "P27", [born, located])  # told by neither sentence alone
    works = doc.sentence([doc.person(person), ("works for", None), (org, org)])
    doc.label(person, org, "P108", [works])
    if rng.random() < 0.5:
        base = world.headquarters[org]
        doc.types[base] = "LOC"
        based = doc.sentence([(org, org), ("is based in", None), (base, base)])
        doc.label(org, base, "P159", [based])
    spouse = world.spouse.get(person)
    if spouse is not None and rng.random() < 0.7:
        doc.types[spouse] = "PER"
        married = doc.sentence([doc.person(person), ("is married to", None), doc.person(spouse)])
        doc.label(person, spouse, "P26", [married])
        doc.label(spouse, person, "P26", [married])
    if rng.random() < 0.6:  # a distractor: a city visited, no relation
        other = rng.choice([c for c in world.cities if c != city])
        doc.types[other] = "LOC"
        doc.sentence([doc.person(person), ("once visited", None), (other, other)])


def synthetic_docred(
    num_documents: int,
    seed: int = 0,
    world_seed: int = 0,
    people_per_document: int = 2,
    world_people: int = 400,
) -> list[dict[str, Any]]:
    """``num_documents`` DocRED-format documents about the ``world_people`` people of world
    ``world_seed`` (module docstring), drawn with ``seed``; titles are unique within a seed.
    The more documents a split has per person of the world, the more of another split's facts
    it holds."""
    require_int(num_documents, "num_documents", 1)
    require_int(seed, "seed", 0)
    require_int(world_seed, "world_seed", 0)
    require_int(people_per_document, "people_per_document", 1)
    require_int(world_people, "world_people", 1)
    if num_documents < 1 or not 1 <= people_per_document <= world_people:
        raise ValueError("need a document and 1 <= people_per_document <= world_people.")
    world = _World(world_seed, world_people)
    rng = random.Random(f"docs-{world_seed}-{seed}")
    documents = []
    for index in range(num_documents):
        doc = _Document(f"synthetic-{seed}-{index}")
        for person in rng.sample(world.people, people_per_document):
            _tell(doc, world, person, rng)
        if rng.random() < 0.5:  # an organisation named with no fact about it
            org = rng.choice(world.orgs)
            doc.types[org] = "ORG"
            doc.sentence([("A report mentioned", None), (org, org)])
        documents.append(doc.as_dict())
    return documents
