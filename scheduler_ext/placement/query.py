"""A nova-free allocation-candidate query: what the engine answers.

``CandidateRequest`` is the single, unsuffixed request group of placement's
``GET /allocation_candidates`` (microversion 1.39) plus the request-wide
``root_required`` and ``limit``. It is validated when built: every failure
is an ``InvalidRequest`` naming the field and the value. Query features the
engine does not answer exactly (granular ``resourcesN`` groups,
``group_policy`` with them, ``same_subtree``) raise ``Unsupported`` from
``from_query`` so the caller can ask placement instead.

Units: every amount is a whole number of units of its resource class
(``MEMORY_MB`` in MiB, ``DISK_GB`` in GiB, ``VCPU`` in virtual CPUs).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

from scheduler_ext import errors
from scheduler_ext.placement import validation

#: A request amount above this can never fit (placement's columns are int32).
MAX_AMOUNT = 2**63 - 1

_SUFFIXED = re.compile(r"^(resources|required|member_of|in_tree)(.+)$")
_KNOWN = {"resources", "required", "member_of", "in_tree", "root_required",
          "limit", "group_policy"}


def _bad(field: str, value: Any, why: str) -> errors.InvalidRequest:
    return validation.bad(field, value, why)


def _names(values: Any, field: str) -> frozenset[str]:
    if values is None:
        return frozenset()
    if isinstance(values, (str, bytes)):
        raise _bad(field, values, "must be a collection of trait names, not a string")
    return frozenset(validation.trait(v, field) for v in values)


def _aggs(values: Any, field: str) -> frozenset[str]:
    if values is None:
        return frozenset()
    if isinstance(values, (str, bytes)):
        raise _bad(field, values, "must be a collection of aggregate UUIDs, not a string")
    return frozenset(validation.uuid(v, field) for v in values)


def _any_of_groups(values: Any, field: str,
                   parse: Callable[[Any, str], frozenset[str]],
                   what: str) -> tuple[frozenset[str], ...]:
    """AND of any-of groups: each a non-empty collection of ``what``,
    duplicates dropped, order kept."""
    if isinstance(values, (str, bytes)):
        raise _bad(field, values, f"must be a sequence of {what} collections")
    groups = []
    for group in values:
        names = parse(group, field)
        if not names:
            raise _bad(field, group, f"an any-of group needs a {what}")
        groups.append(names)
    return tuple(dict.fromkeys(groups))


@dataclasses.dataclass(frozen=True)
class CandidateRequest:
    """One allocation-candidate query (placement 1.39, unsuffixed group).

    * ``resources``: ``{resource class: amount >= 1}``, at least one class.
    * ``required`` / ``forbidden``: trait names. Required traits are met
      *collectively* by the providers of a candidate; forbidden traits must
      be absent from *every* provider of a candidate.
    * ``required_any``: any-of trait groups (placement's ``required=in:A,B``);
      each group needs one of its traits somewhere in the candidate.
    * ``member_of``: AND of any-of aggregate lists; every provider that
      supplies resources must be in one aggregate of each list.
      ``forbidden_aggregates``: no supplying provider, and not the anchor
      root, may be in any of these.
    * ``in_tree``: only the tree of this provider; sharing providers are
      then not considered (placement turns sharing off for the group).
    * ``root_required`` / ``root_forbidden``: traits of the anchor root
      only (never of a sharing provider serving it).
    * ``limit``: at most this many allocation requests (``None``: all);
      ``randomize``: sample (with limit) or shuffle (without), as placement
      does with ``[placement]randomize_allocation_candidates``.

    Building one normalizes the fields (frozensets, lower-case UUIDs) and
    validates them; see the module docstring for the errors.
    """

    resources: Mapping[str, int]
    required: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()
    required_any: tuple[frozenset[str], ...] = ()
    member_of: tuple[frozenset[str], ...] = ()
    forbidden_aggregates: frozenset[str] = frozenset()
    in_tree: str | None = None
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    limit: int | None = None
    randomize: bool = False

    def __post_init__(self) -> None:
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        res = self.resources
        if not isinstance(res, Mapping) or not res:
            raise _bad("resources", res,
                       "must be a non-empty mapping of resource class to amount")
        put("resources", {
            validation.resource_class(rc, "resources"):
                validation.integer(n, f"resources[{rc}]", 1, MAX_AMOUNT)
            for rc, n in sorted(res.items(), key=lambda kv: str(kv[0]))})
        put("required", _names(self.required, "required"))
        put("forbidden", _names(self.forbidden, "forbidden"))
        put("required_any", _any_of_groups(self.required_any, "required_any",
                                           _names, "trait name"))
        put("member_of", _any_of_groups(self.member_of, "member_of", _aggs,
                                        "aggregate UUID"))
        put("forbidden_aggregates",
            _aggs(self.forbidden_aggregates, "forbidden_aggregates"))
        if self.in_tree is not None:
            put("in_tree", validation.uuid(self.in_tree, "in_tree"))
        put("root_required", _names(self.root_required, "root_required"))
        put("root_forbidden", _names(self.root_forbidden, "root_forbidden"))
        if self.limit is not None:
            put("limit", validation.integer(self.limit, "limit", 1, MAX_AMOUNT))
        if not isinstance(self.randomize, bool):
            raise _bad("randomize", self.randomize, "must be a bool")
        self._check_conflicts()

    def _check_conflicts(self) -> None:
        # placement's rule: a required trait, or an any-of group all of
        # whose traits are forbidden, conflicts (HTTP 400)
        both = sorted(self.required & self.forbidden)
        if both:
            raise errors.InvalidRequest(
                f"trait {both[0]} is both required and forbidden",
                field="required", value=both[0])
        for group in self.required_any:
            if group <= self.forbidden:
                raise errors.InvalidRequest(
                    f"every trait of required any-of group {sorted(group)} "
                    "is forbidden", field="required_any", value=sorted(group))
        both = sorted(self.root_required & self.root_forbidden)
        if both:
            raise errors.InvalidRequest(
                f"trait {both[0]} is both required and forbidden on the root",
                field="root_required", value=both[0])

    # ------------------------------------------------------------ derived
    @property
    def trait_groups(self) -> tuple[frozenset[str], ...]:
        """Required traits as AND of any-of groups (a plain required trait
        is a group of one); duplicates removed, order stable."""
        return tuple(dict.fromkeys(
            [frozenset([t]) for t in sorted(self.required)]
            + list(self.required_any)))

    def replace(self, **changes: Any) -> "CandidateRequest":
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    # ----------------------------------------------------- query strings
    def to_query(self) -> list[tuple[str, str]]:
        """``GET /allocation_candidates`` parameters for microversion 1.39."""
        q = [("resources", ",".join(f"{rc}:{n}" for rc, n in self.resources.items()))]
        plain = sorted(self.required) + [f"!{t}" for t in sorted(self.forbidden)]
        if plain:
            q.append(("required", ",".join(plain)))
        for group in self.required_any:
            q.append(("required", "in:" + ",".join(sorted(group))))
        for aggs in self.member_of:
            q.append(("member_of", next(iter(aggs)) if len(aggs) == 1
                      else "in:" + ",".join(sorted(aggs))))
        if self.forbidden_aggregates:
            banned = sorted(self.forbidden_aggregates)
            q.append(("member_of", f"!{banned[0]}" if len(banned) == 1
                      else "!in:" + ",".join(banned)))
        if self.in_tree:
            q.append(("in_tree", self.in_tree))
        root = sorted(self.root_required) + [f"!{t}" for t in sorted(self.root_forbidden)]
        if root:
            q.append(("root_required", ",".join(root)))
        if self.limit is not None:
            q.append(("limit", str(self.limit)))
        return q

    @classmethod
    def from_query(cls, params: Mapping[str, Any] | Sequence[tuple[str, str]],
                   *, randomize: bool = False) -> "CandidateRequest":
        """Parse placement query parameters (a mapping of name to a value or
        list of values, or a list of pairs), microversion 1.39 rules.

        Raises ``Unsupported`` for suffixed groups and ``same_subtree``,
        ``InvalidRequest`` for malformed or unknown parameters.
        """
        by_key = _by_key(params)
        required, forbidden, groups = _parse_traits(by_key.get("required", []))
        member_of, bad_aggs = _parse_member_of(by_key.get("member_of", []))
        root_req, root_forb = _split_negated(
            t for value in by_key.get("root_required", []) for t in value.split(","))
        limit = None
        if "limit" in by_key:
            text = by_key["limit"][0]
            if not text.isdigit():
                raise _bad("limit", text, "must be a positive integer")
            limit = int(text)
        if "group_policy" in by_key and by_key["group_policy"][0] not in ("none", "isolate"):
            raise _bad("group_policy", by_key["group_policy"][0], "must be none or isolate")
        return cls(resources=_parse_resources(by_key["resources"][0]),
                   required=frozenset(required),
                   forbidden=frozenset(forbidden),
                   required_any=tuple(frozenset(g) for g in groups),
                   member_of=tuple(frozenset(m) for m in member_of),
                   forbidden_aggregates=frozenset(bad_aggs),
                   in_tree=by_key.get("in_tree", [None])[0],
                   root_required=frozenset(root_req),
                   root_forbidden=frozenset(root_forb), limit=limit,
                   randomize=randomize)


def _by_key(params: Mapping[str, Any] | Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """The values of each known parameter, checked for type, repetition and
    presence of ``resources``."""
    pairs: list[tuple[str, str]] = []
    items = params.items() if isinstance(params, Mapping) else params
    for key, value in items:
        values = value if isinstance(value, (list, tuple)) else [value]
        pairs += [(key, v) for v in values]
    by_key: dict[str, list[str]] = {}
    for key, value in pairs:
        if not isinstance(value, str):
            raise _bad(key, value, "query values are strings")
        if key == "same_subtree" or _SUFFIXED.match(key):
            raise errors.Unsupported(
                f"query parameter {key!r}: granular request groups and "
                "same_subtree are answered by placement, not the engine")
        if key not in _KNOWN:
            raise _bad(key, value, "unknown query parameter")
        by_key.setdefault(key, []).append(value)
    for key in ("resources", "in_tree", "root_required", "limit", "group_policy"):
        if len(by_key.get(key, [])) > 1:
            raise _bad(key, by_key[key], "may be given only once")
    if "resources" not in by_key:
        raise _bad("resources", None, "is required")
    return by_key


def _parse_resources(value: str) -> dict[str, int]:
    resources: dict[str, int] = {}
    for item in value.split(","):
        rc, sep, amount = item.partition(":")
        if not sep or not amount.strip().lstrip("-").isdigit():
            raise _bad("resources", item, "expected RESOURCE_CLASS:AMOUNT")
        if rc in resources:
            raise _bad("resources", rc, "resource class given twice")
        resources[rc] = int(amount)
    return resources


def _parse_member_of(values: Iterable[str]) -> tuple[list[list[str]], set[str]]:
    """(any-of aggregate lists, forbidden aggregates)."""
    member_of: list[list[str]] = []
    bad_aggs: set[str] = set()
    for value in values:
        neg = value.startswith("!")
        body = value[1:] if neg else value
        if body.startswith("in:"):
            aggs = body[3:].split(",")
        elif "," in body:
            raise _bad("member_of", value, "several aggregates need the in: prefix")
        else:
            aggs = [body]
        if neg:
            bad_aggs.update(aggs)
        else:
            member_of.append(aggs)
    return member_of, bad_aggs


def _split_negated(names: Iterable[str]) -> tuple[set[str], set[str]]:
    """(names, names given with a leading ``!``)."""
    plain: set[str] = set()
    negated: set[str] = set()
    for name in names:
        (negated if name.startswith("!") else plain).add(name.lstrip("!"))
    return plain, negated


def _parse_traits(values: Iterable[str]) -> tuple[set[str], set[str], list[list[str]]]:
    plain: list[str] = []
    groups: list[list[str]] = []
    for value in values:
        if value.startswith("in:"):
            names = value[3:].split(",")
            if any(n.startswith("!") for n in names):
                raise _bad("required", value, "an in: group cannot hold forbidden traits")
            groups.append(names)
        else:
            plain += value.split(",")
    required, forbidden = _split_negated(plain)
    return required, forbidden, groups
