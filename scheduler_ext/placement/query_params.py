"""``GET /allocation_candidates`` query parameters, parsed by the rules of
one microversion (placement 16.0.0's ``lib.RequestGroup`` and ``util``).

What changes with the microversion (each refused with placement's 400,
here ``InvalidRequest``, below the version that brought it):

* ``limit`` 1.16; ``required`` 1.17; ``member_of`` 1.21; ``!TRAIT`` 1.22;
  repeated ``member_of`` 1.24; suffixed groups and ``group_policy`` 1.25
  (suffixes are numbers ``[1-9][0-9]*`` until 1.32, then 1-64 characters
  of ``[a-zA-Z0-9_-]``); ``in_tree`` 1.31; ``!`` aggregates 1.32;
  ``root_required`` 1.35; ``same_subtree`` 1.36;
* ``required=in:A,B`` (any-of) is refused below 1.39, and below 1.39 a
  repeated ``required`` (or ``requiredN``) keeps only its **last** value;
  from 1.39 every value is ANDed.

Stricter than placement: a repeated ``resources``, ``in_tree``, ``limit``
or ``group_policy`` and a class named twice in one ``resources`` are
refused (placement silently keeps one of them).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

from scheduler_ext import errors
from scheduler_ext.placement import validation

#: Suffixes of granular groups (placement 1.33 and later; before: digits).
SUFFIX_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

MIN_VERSION = (1, 10)
MAX_VERSION = (1, 39)
_GROUP_KEY = re.compile(r"^(resources|required|member_of|in_tree)(.*)$")
_NUMBERED = re.compile(r"^[1-9][0-9]*$")
#: request-wide parameter -> microversion that brought it
_WIDE = {"limit": (1, 16), "group_policy": (1, 25), "root_required": (1, 35),
         "same_subtree": (1, 36)}
#: group parameter -> microversion that brought it
_SINCE = {"resources": (1, 10), "required": (1, 17), "member_of": (1, 21),
          "in_tree": (1, 31)}
_ONCE = ("resources", "in_tree", "limit", "group_policy", "root_required")


def _bad(field: str, value: Any, why: str) -> errors.InvalidRequest:
    return validation.bad(field, value, why)


def version(text: Any) -> tuple[int, int]:
    """``"1.NN"`` as a tuple, within what placement 16.0.0 serves."""
    m = re.match(r"^1\.([0-9]+)$", text) if isinstance(text, str) else None
    got = (1, int(m.group(1))) if m else None
    if got is None or not MIN_VERSION <= got <= MAX_VERSION:
        raise _bad("microversion", text, "must be 1.10 to 1.39")
    return got


def _pairs(params: Mapping[str, Any] | Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    out = []
    items = params.items() if isinstance(params, Mapping) else params
    for key, value in items:
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(v, str):
                raise _bad(key, v, "query values are strings")
            out.append((key, v))
    return out


def _classify(pairs: list[tuple[str, str]], ver: tuple[int, int]
              ) -> tuple[dict[str, dict[str, list[str]]], dict[str, list[str]]]:
    """(suffix -> parameter -> values, in order of first appearance;
    request-wide parameter -> values)."""
    groups: dict[str, dict[str, list[str]]] = {}
    wide: dict[str, list[str]] = {}
    for key, value in pairs:
        if key in _WIDE and ver >= _WIDE[key]:
            wide.setdefault(key, []).append(value)
            continue
        m = _GROUP_KEY.match(key)
        prefix, suffix = (m.group(1), m.group(2)) if m else ("", "")
        pattern = SUFFIX_RE if ver >= (1, 33) else _NUMBERED
        if not m or ver < _SINCE[prefix] or (suffix and (
                ver < (1, 25) or not pattern.match(suffix))):
            raise _bad(key, value, f"unknown query parameter at microversion "
                       f"{ver[0]}.{ver[1]}")
        groups.setdefault(suffix, {}).setdefault(prefix, []).append(value)
    for params in [wide] + list(groups.values()):
        for key in _ONCE:
            if len(params.get(key, [])) > 1:
                raise _bad(key, params[key], "may be given only once")
    return groups, wide


def parse(params: Mapping[str, Any] | Sequence[tuple[str, str]],
          microversion: str = "1.39") -> dict[str, Any]:
    """Keyword arguments of a ``CandidateRequest`` (without ``randomize``)
    for ``params`` read at ``microversion``; ``granular`` holds each
    suffixed group as ``(suffix, its RequestGroup keyword arguments)``."""
    ver = version(microversion)
    groups, wide = _classify(_pairs(params), ver)
    if not groups:
        raise _bad("resources", None, "is required")
    parsed = {suffix: _group(suffix, values, ver) for suffix, values in groups.items()}
    kwargs: dict[str, Any] = {"resources": {}}
    kwargs.update(parsed.pop("", {}))
    kwargs["granular"] = tuple(parsed.items())
    if "limit" in wide:
        text = wide["limit"][0]
        if not re.match(r"^[1-9][0-9]*$", text):
            raise _bad("limit", text, "must be a positive integer")
        kwargs["limit"] = int(text)
    if "group_policy" in wide:
        kwargs["group_policy"] = wide["group_policy"][0]
    if "root_required" in wide:
        kwargs["root_required"], kwargs["root_forbidden"] = _root(
            wide["root_required"][0])
    kwargs["same_subtree"] = tuple(
        frozenset(s.strip() for s in value.split(","))
        for value in wide.get("same_subtree", []))
    return kwargs


def _group(suffix: str, values: dict[str, list[str]], ver: tuple[int, int]
           ) -> dict[str, Any]:
    """One group's fields as parsed (validated later by the request)."""
    resources = _parse_resources(values["resources"][0], suffix) \
        if "resources" in values else {}
    required_values = values.get("required", [])
    if ver < (1, 39):
        required_values = required_values[-1:]
    required, forbidden, any_of = _parse_traits(required_values, suffix, ver)
    member_of, bad_aggs = _parse_member_of(values.get("member_of", []), suffix, ver)
    in_tree = values["in_tree"][0].strip() if "in_tree" in values else None
    return dict(resources=resources, required=frozenset(required),
                forbidden=frozenset(forbidden),
                required_any=tuple(frozenset(g) for g in any_of),
                member_of=tuple(frozenset(m) for m in member_of),
                forbidden_aggregates=frozenset(bad_aggs), in_tree=in_tree)


def _parse_resources(value: str, suffix: str) -> dict[str, int]:
    field = f"resources{suffix}"
    resources: dict[str, int] = {}
    for item in value.split(","):
        rc, sep, amount = item.partition(":")
        if not sep or ":" in amount or not amount.strip().lstrip("-").isdigit():
            raise _bad(field, item, "expected RESOURCE_CLASS:AMOUNT")
        if rc in resources:
            raise _bad(field, rc, "resource class given twice")
        resources[rc] = int(amount)
    return resources


def _parse_member_of(values: list[str], suffix: str, ver: tuple[int, int]
                     ) -> tuple[list[list[str]], set[str]]:
    """(any-of aggregate lists, forbidden aggregates)."""
    field = f"member_of{suffix}"
    if len(values) > 1 and ver < (1, 24):
        raise _bad(field, values, "may be given only once before microversion 1.24")
    member_of: list[list[str]] = []
    bad_aggs: set[str] = set()
    for value in values:
        neg = value.startswith("!")
        if neg and ver < (1, 32):
            raise _bad(field, value, "forbidden aggregates need microversion 1.32")
        body = value[1:] if neg else value
        if body.startswith("in:"):
            aggs = body[3:].split(",")
        elif "," in body:
            raise _bad(field, value, "several aggregates need the in: prefix")
        else:
            aggs = [body]
        if neg:
            bad_aggs.update(aggs)
        else:
            member_of.append(aggs)
    return member_of, bad_aggs


def _split_negated(names: Iterable[str], field: str) -> tuple[set[str], set[str]]:
    """(names, names given with leading ``!``); empty names refused."""
    plain: set[str] = set()
    negated: set[str] = set()
    for raw in names:
        name = raw.strip()
        bare = name.lstrip("!")
        if not bare:
            raise _bad(field, raw, "an empty trait name")
        (negated if name.startswith("!") else plain).add(bare)
    return plain, negated


def _parse_traits(values: Iterable[str], suffix: str, ver: tuple[int, int]
                  ) -> tuple[set[str], set[str], list[list[str]]]:
    field = f"required{suffix}"
    plain: list[str] = []
    groups: list[list[str]] = []
    for value in values:
        if value.startswith("in:"):
            if ver < (1, 39):
                raise _bad(field, value, "the in: form needs microversion 1.39")
            names = [n.strip() for n in value[3:].split(",")]
            if any(n.startswith("!") for n in names):
                raise _bad(field, value, "an in: group cannot hold forbidden traits")
            if not all(names):
                raise _bad(field, value, "an empty trait name")
            groups.append(names)
        else:
            plain += value.split(",")
    required, forbidden = _split_negated(plain, field)
    if forbidden and ver < (1, 22):
        raise _bad(field, sorted(forbidden), "forbidden traits need microversion 1.22")
    return required, forbidden, groups


def _root(value: str) -> tuple[set[str], set[str]]:
    if value.startswith("in:"):
        raise _bad("root_required", value, "the in: form is not accepted here")
    required, forbidden = _split_negated(value.split(","), "root_required")
    return required, forbidden
