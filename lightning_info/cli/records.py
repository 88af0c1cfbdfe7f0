"""Reading a user's files for the commands: records of JSON-lines files, a record's text (one
field, several fields, a template, and an optional prompt), output folders and model folders.
Every refusal is a :class:`~lightning_info.cli.BadInput` that names the file (and the line). Only
the standard library is imported until a function runs."""

from __future__ import annotations

import functools
import json
import os
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightning_info.cli import BadInput


@dataclass(frozen=True)
class RecordText:
    """How a record's text (and optional prompt) is formed from its fields.

    Exactly one of ``text_field`` (one field), ``fields`` (several, joined with a newline) and
    ``template`` (``str.format`` with named fields, e.g. ``"{prompt}\\n{response}"``) names the
    text; with none given, the field ``text`` holds it. ``prompt_template`` (named fields too)
    forms the prompt the text is conditioned on; ``None``: no prompt. Every named field must hold
    a string.
    """

    text_field: str | None = None
    fields: tuple[str, ...] | None = None
    template: str | None = None
    prompt_template: str | None = None

    @classmethod
    def from_options(
        cls,
        text_field: str | None,
        fields: list[str] | None,
        template: str | None,
        prompt_template: str | None,
    ) -> RecordText:
        """The options of a command, checked; raises :class:`BadInput` saying what to give."""
        options = {"text_field": text_field, "fields": fields, "template": template}
        given = [name for name, value in options.items() if value is not None]
        if len(given) > 1:
            raise BadInput(
                f"give one of text_field, fields and template to form the text, got {given}."
            )
        if not given:
            text_field = "text"
        if text_field is not None and (not isinstance(text_field, str) or not text_field):
            raise BadInput(f"text_field must be a field name, got {text_field!r}.")
        if fields is not None:
            if isinstance(fields, str) or not fields:
                raise BadInput(f"fields must be a non-empty list of field names, got {fields!r}.")
            if not all(isinstance(name, str) and name for name in fields):
                raise BadInput(f"fields must hold field names (strings), got {fields!r}.")
            fields = tuple(fields)
        for name, value in (("template", template), ("prompt_template", prompt_template)):
            if value is not None:
                template_fields(value, name)
        return cls(text_field, fields, template, prompt_template)

    @functools.cached_property
    def names(self) -> list[str]:
        """The fields the text is formed from."""
        if self.template is not None:
            return template_fields(self.template, "template")
        return list(self.fields) if self.fields is not None else [self.text_field]

    @functools.cached_property
    def prompt_names(self) -> list[str]:
        """The fields the prompt is formed from."""
        if self.prompt_template is None:
            return []
        return template_fields(self.prompt_template, "prompt_template")

    def text(self, record: dict[str, Any], path: Path, line: int) -> str:
        """The record's text; :class:`BadInput` naming the file and line when a field is missing
        or holds no string."""
        values = {name: _string_field(record, name, path, line) for name in self.names}
        if self.template is None:
            return "\n".join(values[name] for name in self.names)
        return _filled(self.template, "template", values, path, line)

    def prompt(self, record: dict[str, Any], path: Path, line: int) -> str:
        """The record's prompt (``""`` without ``prompt_template``)."""
        if self.prompt_template is None:
            return ""
        values = {name: _string_field(record, name, path, line) for name in self.prompt_names}
        return _filled(self.prompt_template, "prompt_template", values, path, line)

    def read(
        self, records: list[tuple[int, dict[str, Any]]], path: Path
    ) -> tuple[list[str], list[str]]:
        """``(prompts, texts)`` of ``records`` (:func:`read_records`); a text that is empty or
        whitespace only is refused, naming the file and line."""
        prompts, texts = [], []
        for line, record in records:
            text = self.text(record, path, line)
            if not text.strip():
                raise BadInput(
                    f"{path}, line {line}: the text is empty or whitespace only; give every "
                    "record some text, or drop the line."
                )
            prompts.append(self.prompt(record, path, line))
            texts.append(text)
        return prompts, texts


def template_fields(template: str, name: str = "template") -> list[str]:
    """The named fields of a ``str.format`` template, in order of first use; :class:`BadInput`
    for a template that is not a string, names no field, or has a positional or dotted one."""
    if not isinstance(template, str):
        raise BadInput(f"{name} must be a string such as '{{prompt}}\\n{{response}}'.")
    try:
        parsed = [
            field for _, field, _, _ in string.Formatter().parse(template) if field is not None
        ]
    except ValueError as err:
        raise BadInput(f"{name} {template!r} is not a format string ({err}).") from None
    if not parsed:
        raise BadInput(f"{name} {template!r} names no field; write them in braces: '{{prompt}}'.")
    for field in parsed:
        if not field or field.isdigit() or re.search(r"[.\[]", field):
            raise BadInput(
                f"{name} {template!r} has the field {{{field}}}; name each field of the record "
                "as it is ('{prompt}'), without positions, attributes or indices."
            )
    return list(dict.fromkeys(parsed))


def _filled(template: str, name: str, values: dict[str, str], path: Path, line: int) -> str:
    try:
        return template.format_map(values)
    except (KeyError, IndexError, ValueError) as err:
        raise BadInput(
            f"{path}, line {line}: {name} {template!r} cannot be filled ({err})."
        ) from None


def _string_field(record: dict[str, Any], name: str, path: Path, line: int) -> str:
    if name not in record:
        raise BadInput(
            f"{path}, line {line}: the record has no field {name!r} (its fields: "
            f"{sorted(record)}); choose the text with text_field, fields or template."
        )
    value = record[name]
    if not isinstance(value, str):
        raise BadInput(
            f"{path}, line {line}: the field {name!r} holds {type(value).__name__} "
            f"{json.dumps(value)[:40]}, not a string."
        )
    return value


def read_records(path: str | os.PathLike, what: str) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of every non-blank line of the JSON-lines file ``path``.

    :class:`BadInput` (``what`` names the file's role) for a missing file, a line that is not
    JSON or not a JSON object (naming the line), and a file without records.
    """
    from lightning_info.core.files import read_json_lines

    path = Path(path)
    if not path.is_file():
        reason = "is a folder" if path.is_dir() else "does not exist"
        raise BadInput(f"{path}: the {what} file {reason}; give a JSON-lines file.")
    records = []
    try:
        for line, value in read_json_lines(path):
            if not isinstance(value, dict):
                raise BadInput(
                    f"{path}, line {line}: a {type(value).__name__}, not a JSON object; each "
                    'line must hold one record such as {"text": "..."}.'
                )
            records.append((line, value))
    except ValueError as err:
        if isinstance(err, BadInput):
            raise
        raise BadInput(str(err)) from None
    if not records:
        raise BadInput(f"{path}: the {what} file holds no records (no non-blank line).")
    return records


def output_folder(output_dir: str | os.PathLike) -> Path:
    """``output_dir`` as a path, refused when it is a file (it is created when written to)."""
    folder = Path(output_dir)
    if folder.exists() and not folder.is_dir():
        raise BadInput(f"{folder}: output_dir is a file; give a folder (it is created if absent).")
    for parent in folder.parents:
        if parent.exists():
            if not parent.is_dir():
                raise BadInput(f"{folder}: output_dir lies under the file {parent}.")
            break
    return folder


def model_folder(folder: str | os.PathLike, what: str) -> Path:
    """A local folder written by ``save_pretrained`` (it holds ``config.json``), or
    :class:`BadInput` saying what is missing."""
    path = Path(folder)
    if not path.is_dir():
        reason = "is a file" if path.exists() else "does not exist"
        raise BadInput(
            f"{path}: the {what} folder {reason}; give a folder written by save_pretrained "
            "(model and tokenizer)."
        )
    if not (path / "config.json").is_file():
        raise BadInput(
            f"{path}: the {what} folder has no config.json; save the model there with "
            "model.save_pretrained(folder) (and its tokenizer with tokenizer.save_pretrained)."
        )
    return path


def load_model(folder: Path, what: str, device: str | None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a checked :func:`model_folder`, in eval mode on ``device``
    (``None``: the first GPU when there is one, else the CPU)."""
    import torch

    from lightning_info.lm.tiny_lm import load_causal_lm

    try:
        model, tokenizer = load_causal_lm(str(folder))
    except (OSError, ValueError, TypeError) as err:
        raise BadInput(
            f"{folder}: the {what} folder cannot be loaded as a causal LM ({err})."
        ) from None
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        model.to(torch.device(device))
    except (RuntimeError, AssertionError) as err:
        raise BadInput(f"device {device!r} cannot hold the {what} ({err}).") from None
    return model, tokenizer


def model_positions(model: Any) -> int | None:
    """The most tokens ``model`` takes in one row, where its configuration says."""
    config = model.config
    return getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)
