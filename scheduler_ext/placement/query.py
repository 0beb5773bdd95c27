"""A nova-free allocation-candidate query: what the engine answers.

``CandidateRequest`` is one ``GET /allocation_candidates`` request
(placement 1.39): the unnumbered request group (its fields sit on the
request itself: ``resources``, ``required``, ...), the suffixed groups
(``granular``: ``resourcesN``, ``requiredN``, ``member_ofN``,
``in_treeN``, each a ``RequestGroup``), and the request-wide
``group_policy``, ``same_subtree``, ``root_required`` and ``limit``. It is
validated when built: every failure is an ``InvalidRequest`` naming the
field (the query parameter, with its suffix) and the value, where placement
answers 400. ``from_query`` parses query parameters by the rules of a
microversion (``query_params``).

Units: every amount is a whole number of units of its resource class
(``MEMORY_MB`` in MiB, ``DISK_GB`` in GiB, ``VCPU`` in virtual CPUs).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Mapping, Sequence

from scheduler_ext import errors
from scheduler_ext.placement import query_params, validation
from scheduler_ext.placement.query_params import SUFFIX_RE

#: A request amount above this can never fit (placement's columns are int32).
MAX_AMOUNT = 2**63 - 1
GROUP_POLICIES = ("none", "isolate")


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


def _resources(res: Any, field: str) -> dict[str, int]:
    if not isinstance(res, Mapping):
        raise _bad(field, res, "must be a mapping of resource class to amount")
    return {validation.resource_class(rc, field):
            validation.integer(n, f"{field}[{rc}]", 1, MAX_AMOUNT)
            for rc, n in sorted(res.items(), key=lambda kv: str(kv[0]))}


def _normalize_group(obj: Any, suffix: str) -> None:
    """Normalize and check the group fields of ``obj`` (a RequestGroup or a
    CandidateRequest's unnumbered group) in place; field names in errors
    carry ``suffix``."""
    put = lambda k, v: object.__setattr__(obj, k, v)  # noqa: E731
    f = lambda name: f"{name}{suffix}"  # noqa: E731
    put("resources", _resources(obj.resources, f("resources")))
    put("required", _names(obj.required, f("required")))
    put("forbidden", _names(obj.forbidden, f("forbidden")))
    put("required_any", _any_of_groups(obj.required_any, f("required_any"),
                                       _names, "trait name"))
    put("member_of", _any_of_groups(obj.member_of, f("member_of"), _aggs,
                                    "aggregate UUID"))
    put("forbidden_aggregates",
        _aggs(obj.forbidden_aggregates, f("forbidden_aggregates")))
    if obj.in_tree is not None:
        put("in_tree", validation.uuid(obj.in_tree, f("in_tree")))
    # placement's rule: a required trait, or an any-of group all of whose
    # traits are forbidden, conflicts (HTTP 400)
    both = sorted(obj.required & obj.forbidden)
    if both:
        raise errors.InvalidRequest(
            f"trait {both[0]} is both required and forbidden",
            field=f("required"), value=both[0])
    for group in obj.required_any:
        if group <= obj.forbidden:
            raise errors.InvalidRequest(
                f"every trait of required any-of group {sorted(group)} "
                "is forbidden", field=f("required_any"), value=sorted(group))


def trait_groups_of(group: Any) -> tuple[frozenset[str], ...]:
    """Required traits of a group as AND of any-of groups (a plain required
    trait is a group of one); duplicates removed, order stable."""
    return tuple(dict.fromkeys(
        [frozenset([t]) for t in sorted(group.required)]
        + list(group.required_any)))


def group_params(group: Any, suffix: str) -> list[tuple[str, str]]:
    """The query parameters of one group (1.39 syntax)."""
    q = []
    if group.resources:
        q.append((f"resources{suffix}",
                  ",".join(f"{rc}:{n}" for rc, n in group.resources.items())))
    plain = sorted(group.required) + [f"!{t}" for t in sorted(group.forbidden)]
    if plain:
        q.append((f"required{suffix}", ",".join(plain)))
    for names in group.required_any:
        q.append((f"required{suffix}", "in:" + ",".join(sorted(names))))
    for aggs in group.member_of:
        q.append((f"member_of{suffix}", next(iter(aggs)) if len(aggs) == 1
                  else "in:" + ",".join(sorted(aggs))))
    if group.forbidden_aggregates:
        banned = sorted(group.forbidden_aggregates)
        q.append((f"member_of{suffix}", f"!{banned[0]}" if len(banned) == 1
                  else "!in:" + ",".join(banned)))
    if group.in_tree:
        q.append((f"in_tree{suffix}", group.in_tree))
    return q


@dataclasses.dataclass(frozen=True)
class RequestGroup:
    """One request group. The unnumbered group (``suffix == ""``) may take
    its resources from several providers of one tree and from sharing
    providers; a suffixed (granular) group takes all of its resources from
    one provider. ``resources`` may be empty for a suffixed group named in
    a ``same_subtree`` (a resourceless group: it only maps a provider).
    Fields as on ``CandidateRequest``."""

    suffix: str = ""
    resources: Mapping[str, int] = dataclasses.field(default_factory=dict)
    required: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()
    required_any: tuple[frozenset[str], ...] = ()
    member_of: tuple[frozenset[str], ...] = ()
    forbidden_aggregates: frozenset[str] = frozenset()
    in_tree: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.suffix, str) or not (
                self.suffix == "" or SUFFIX_RE.match(self.suffix)):
            raise _bad("suffix", self.suffix,
                       "group suffixes are 1-64 characters of [a-zA-Z0-9_-]")
        _normalize_group(self, self.suffix)

    @classmethod
    def unnumbered_of(cls, request: "CandidateRequest") -> "RequestGroup":
        """The unnumbered group of ``request``, whose fields are normalized
        and checked already: built without checking them again."""
        group = object.__new__(cls)
        object.__setattr__(group, "suffix", "")
        for f in dataclasses.fields(cls)[1:]:
            object.__setattr__(group, f.name, getattr(request, f.name))
        return group

    @property
    def trait_groups(self) -> tuple[frozenset[str], ...]:
        return trait_groups_of(self)

    @property
    def granular(self) -> bool:
        """True for a suffixed group (one provider supplies all of it)."""
        return self.suffix != ""


@dataclasses.dataclass(frozen=True)
class CandidateRequest:
    """One allocation-candidate query (placement 1.39).

    The unnumbered group:

    * ``resources``: ``{resource class: amount >= 1}``; empty only when
      there are granular groups (then it has no other field either).
    * ``required`` / ``forbidden``: trait names. Required traits are met
      *collectively* by the providers the group uses; forbidden traits
      must be absent from *every* provider it uses.
    * ``required_any``: any-of trait groups (placement's ``required=in:A,B``);
      each group needs one of its traits among the providers used.
    * ``member_of``: AND of any-of aggregate lists, met by each provider
      used or by its tree's root. ``forbidden_aggregates``: neither a
      provider used nor the anchor root may be in any of these.
    * ``in_tree``: only the tree of this provider; sharing providers are
      then not considered (placement turns sharing off for the group).

    ``granular``: the suffixed groups (``RequestGroup``), each met by a
    single provider. Request-wide:

    * ``group_policy``: ``"none"`` or ``"isolate"`` (the granular groups use
      distinct providers); required with more than one granular group.
    * ``same_subtree``: sets of granular suffixes whose providers must all
      sit under one of them.
    * ``root_required`` / ``root_forbidden``: traits of the anchor root
      only (never of a sharing provider serving it).
    * ``limit``: at most this many allocation requests (``None``: all);
      ``randomize``: sample (with limit) or shuffle (without), as placement
      does with ``[placement]randomize_allocation_candidates``.

    Building one normalizes the fields (frozensets, lower-case UUIDs) and
    validates them (``InvalidRequest`` where placement answers 400).
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
    granular: tuple[RequestGroup, ...] = ()
    group_policy: str | None = None
    same_subtree: tuple[frozenset[str], ...] = ()

    def __post_init__(self) -> None:
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        if not isinstance(self.granular, (tuple, list)) or not all(
                isinstance(g, RequestGroup) and g.granular for g in self.granular):
            raise _bad("granular", self.granular,
                       "must be a sequence of suffixed RequestGroups")
        put("granular", tuple(self.granular))
        if not isinstance(self.resources, Mapping) or (
                not self.resources and not self.granular):
            raise _bad("resources", self.resources,
                       "must be a non-empty mapping of resource class to amount")
        _normalize_group(self, "")
        put("root_required", _names(self.root_required, "root_required"))
        put("root_forbidden", _names(self.root_forbidden, "root_forbidden"))
        if self.limit is not None:
            put("limit", validation.integer(self.limit, "limit", 1, MAX_AMOUNT))
        if not isinstance(self.randomize, bool):
            raise _bad("randomize", self.randomize, "must be a bool")
        both = sorted(self.root_required & self.root_forbidden)
        if both:
            raise errors.InvalidRequest(
                f"trait {both[0]} is both required and forbidden on the root",
                field="root_required", value=both[0])
        put("same_subtree", _subtrees(self.same_subtree))
        _check_groups(self)

    # ------------------------------------------------------------ derived
    # (computed once per request: the fields are set only by __post_init__)
    @functools.cached_property
    def trait_groups(self) -> tuple[frozenset[str], ...]:
        """The unnumbered group's required traits as AND of any-of groups."""
        return trait_groups_of(self)

    @functools.cached_property
    def unnumbered(self) -> RequestGroup | None:
        """The unnumbered group, or None when the request has none."""
        if not self.resources:
            return None
        return RequestGroup.unnumbered_of(self)

    @functools.cached_property
    def groups(self) -> tuple[RequestGroup, ...]:
        """Every group: the unnumbered one (if any) first, then the granular
        ones in their order."""
        first = self.unnumbered
        return ((first,) if first is not None else ()) + self.granular

    @property
    def isolate(self) -> bool:
        return self.group_policy == "isolate" and len(self.granular) > 1

    def total_resources(self) -> dict[str, int]:
        """Amount per class summed over every group (units)."""
        out: dict[str, int] = {}
        for g in self.groups:
            for rc, n in g.resources.items():
                out[rc] = out.get(rc, 0) + n
        return out

    def replace(self, **changes: Any) -> "CandidateRequest":
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    # ----------------------------------------------------- query strings
    def to_query(self) -> list[tuple[str, str]]:
        """``GET /allocation_candidates`` parameters for microversion 1.39."""
        q = group_params(self, "") if self.resources else []
        for g in self.granular:
            q += group_params(g, g.suffix)
        if self.group_policy:
            q.append(("group_policy", self.group_policy))
        for names in self.same_subtree:
            q.append(("same_subtree", ",".join(sorted(names))))
        root = sorted(self.root_required) + [f"!{t}" for t in sorted(self.root_forbidden)]
        if root:
            q.append(("root_required", ",".join(root)))
        if self.limit is not None:
            q.append(("limit", str(self.limit)))
        return q

    @classmethod
    def from_query(cls, params: Mapping[str, Any] | Sequence[tuple[str, str]],
                   *, microversion: str = "1.39",
                   randomize: bool = False) -> "CandidateRequest":
        """Parse placement query parameters (a mapping of name to a value or
        list of values, or a list of pairs) by ``microversion``'s rules
        (see ``query_params``). Raises ``InvalidRequest`` where placement
        answers 400."""
        kwargs = query_params.parse(params, microversion)
        kwargs["granular"] = tuple(RequestGroup(suffix, **fields)
                                   for suffix, fields in kwargs["granular"])
        return cls(**kwargs, randomize=randomize)


def _subtrees(values: Any) -> tuple[frozenset[str], ...]:
    if isinstance(values, (str, bytes)):
        raise _bad("same_subtree", values, "must be a sequence of suffix collections")
    out = []
    for names in values:
        if isinstance(names, (str, bytes)):
            raise _bad("same_subtree", names, "must be a collection of suffixes")
        group = frozenset(names)
        if not group or "" in group:
            raise _bad("same_subtree", sorted(group),
                       "names granular group suffixes (not the unnumbered group)")
        out.append(group)
    return tuple(dict.fromkeys(out))


def _check_groups(req: CandidateRequest) -> None:
    """Placement's request-wide rules on groups (HTTP 400 there)."""
    if not req.resources and (req.required or req.forbidden or req.required_any
                              or req.member_of or req.forbidden_aggregates
                              or req.in_tree):
        raise _bad("resources", {}, "the unnumbered group's traits, aggregates "
                   "and in_tree need resources")
    suffixes = [g.suffix for g in req.granular]
    if len(set(suffixes)) != len(suffixes):
        raise _bad("granular", suffixes, "a suffix is given twice")
    named = set().union(*req.same_subtree) if req.same_subtree else set()
    missing = sorted(named - set(suffixes))
    if missing:
        raise _bad("same_subtree", missing, "names no granular group")
    for g in req.granular:
        if not g.resources and g.suffix not in named:
            raise _bad(f"resources{g.suffix}", {}, "a resourceless group must "
                       "be named in same_subtree")
    if req.group_policy is not None and req.group_policy not in GROUP_POLICIES:
        raise _bad("group_policy", req.group_policy, "must be none or isolate")
    if req.group_policy is None and len(req.granular) > 1:
        raise _bad("group_policy", None, "is required with more than one "
                   "granular group")
