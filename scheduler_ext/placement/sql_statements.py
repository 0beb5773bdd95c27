"""The SQL statements ``sql_snapshot.SqlSnapshot`` runs on placement's
database (read-only; written for sqlite, MySQL/MariaDB and PostgreSQL).
``{name}`` fields are filled with integers by the reader, ``:name`` ones
are bound parameters."""

PROVIDERS = """
SELECT rp.id, rp.uuid, rp.name, rp.generation, root.uuid, parent.uuid
FROM resource_providers rp
LEFT JOIN resource_providers root ON root.id = rp.root_provider_id
LEFT JOIN resource_providers parent ON parent.id = rp.parent_provider_id
"""
GENERATIONS = "SELECT id, uuid, generation FROM resource_providers"
INVENTORIES = """
SELECT i.resource_provider_id, rc.name, i.total, i.reserved, i.min_unit,
       i.max_unit, i.step_size, i.allocation_ratio
FROM inventories i JOIN resource_classes rc ON rc.id = i.resource_class_id
"""
USAGES = """
SELECT rp.uuid, rc.name, SUM(a.used)
FROM allocations a
JOIN resource_providers rp ON rp.id = a.resource_provider_id
JOIN resource_classes rc ON rc.id = a.resource_class_id
"""
USAGES_GROUP = " GROUP BY rp.uuid, rc.name"
TRAITS = """
SELECT rpt.resource_provider_id, t.name
FROM resource_provider_traits rpt JOIN traits t ON t.id = rpt.trait_id
"""
AGGREGATES = """
SELECT rpa.resource_provider_id, pa.uuid
FROM resource_provider_aggregates rpa
JOIN placement_aggregates pa ON pa.id = rpa.aggregate_id
"""
#: A hash (< 2**32) of an allocation row (id, provider, class, used) in
#: 64-bit integer arithmetic that never overflows (ids and amounts are
#: below 2**31), the same on every database: the server sums it over the
#: tail instead of sending the tail.
HASH = ("(CAST(id AS BIGINT) * 2147483629 + CAST(resource_provider_id AS BIGINT) * 40503"
         " + CAST(resource_class_id AS BIGINT) * 9973 + CAST(used AS BIGINT) * 65599)"
         " % 4294967291")
#: An allocation id's checksum bucket: the id rounded down to a multiple
#: of ``{bucket}`` (``%`` is the integer remainder on every database).
BUCKET_OF = "(id - id % {bucket})"
ALLOCATIONS_AFTER = f"""
SELECT id, resource_provider_id, resource_class_id, used, {HASH}
FROM allocations WHERE id > {{low}} ORDER BY id
"""
#: The allocation rows of some checksum buckets, ids in ``(low, high]``.
ALLOCATIONS_IN = f"""
SELECT id, resource_provider_id, resource_class_id, used, {HASH}
FROM allocations WHERE id > {{low}} AND id <= {{high}} AND {BUCKET_OF} IN ({{buckets}})
ORDER BY id
"""
MAX_ALLOCATION_ID = "SELECT MAX(id) FROM allocations"
IDS_OF = "SELECT id FROM resource_providers WHERE uuid IN :uuids"
#: A provider's record in one round trip, without joins but the provider
#: row's (names come from small cached tables). One row shape for all:
#: (kind, provider id, a..f, ratio, uuid, name, root uuid, parent uuid);
#: kind 0: inventory (a class id, b total, c reserved, d min, e max,
#: f step), 1: trait (a trait id), 2: aggregate (a aggregate id), 3: usage
#: (a class id, b used), 4: the provider (a generation, text columns).
DETAILS_OF = """
SELECT 4, rp.id, rp.generation, 0, 0, 0, 0, 0, 0.0,
       rp.uuid, rp.name, root.uuid, parent.uuid
FROM resource_providers rp
LEFT JOIN resource_providers root ON root.id = rp.root_provider_id
LEFT JOIN resource_providers parent ON parent.id = rp.parent_provider_id
WHERE rp.id IN ({ids})
UNION ALL
SELECT 0, resource_provider_id, resource_class_id, total, reserved, min_unit,
       max_unit, step_size, allocation_ratio, NULL, NULL, NULL, NULL
FROM inventories WHERE resource_provider_id IN ({ids})
UNION ALL
SELECT 1, resource_provider_id, trait_id, 0, 0, 0, 0, 0, 0.0, NULL, NULL, NULL, NULL
FROM resource_provider_traits WHERE resource_provider_id IN ({ids})
UNION ALL
SELECT 2, resource_provider_id, aggregate_id, 0, 0, 0, 0, 0, 0.0, NULL, NULL, NULL, NULL
FROM resource_provider_aggregates WHERE resource_provider_id IN ({ids})
UNION ALL
SELECT 3, resource_provider_id, resource_class_id, SUM(used), 0, 0, 0, 0, 0.0,
       NULL, NULL, NULL, NULL
FROM allocations WHERE resource_provider_id IN ({ids})
GROUP BY resource_provider_id, resource_class_id
"""
#: The request path's poll in one statement (one snapshot, one round
#: trip), rows (kind, a..e): kind 5, the allocation rows above ``high``
#: (id, provider, class, used, hash); kind 6, the tail's checksum per
#: bucket (bucket, rows in ``(low, high]`` in it, sum of their hashes; a
#: bucket without rows gives none); kind 3, the usage of the providers the
#: new rows name (provider, class, used).
POLL = f"""
SELECT 5, id, resource_provider_id, resource_class_id, used, {HASH}
FROM allocations WHERE id > {{high}}
UNION ALL
SELECT 6, {BUCKET_OF}, COUNT(*), CAST(SUM({HASH}) AS BIGINT), 0, 0
FROM allocations WHERE id > {{low}} AND id <= {{high}}
GROUP BY {BUCKET_OF}
UNION ALL
SELECT 3, resource_provider_id, resource_class_id, SUM(used), 0, 0
FROM allocations WHERE resource_provider_id IN
    (SELECT resource_provider_id FROM allocations WHERE id > {{high}})
GROUP BY resource_provider_id, resource_class_id
"""
#: PostgreSQL plans and runs the providers' list as an array (one
#: sub-plan, index probes) faster than as a semi-join.
POLL_PG = POLL.replace(
    "IN\n    (SELECT resource_provider_id FROM allocations WHERE id > {high})",
    "= ANY(ARRAY(SELECT resource_provider_id FROM allocations WHERE id > {high}))")
assert POLL_PG != POLL
#: Usage of some providers (class NULL: one that holds nothing; a deleted
#: provider gives no row).
USAGE_OF = """
SELECT rp.id, a.resource_class_id, SUM(a.used)
FROM resource_providers rp LEFT JOIN allocations a ON a.resource_provider_id = rp.id
WHERE rp.id IN ({ids}) GROUP BY rp.id, a.resource_class_id"""
#: One consumer's allocation rows with its consumer, project and user (what
#: GET /allocations/{consumer} shows); ``consumer_id`` is indexed. The
#: consumer's uuid is the statement's one bound parameter (``{bound}``).
CONSUMER = """
SELECT rp.uuid, a.resource_class_id, a.used, c.generation, p.external_id,
       u.external_id, c.consumer_type_id
FROM allocations a
JOIN resource_providers rp ON rp.id = a.resource_provider_id
JOIN consumers c ON c.uuid = a.consumer_id
JOIN projects p ON p.id = c.project_id
JOIN users u ON u.id = c.user_id
WHERE a.consumer_id = {bound}"""
#: placement's name for a consumer without a type (microversion 1.38)
UNKNOWN_CONSUMER_TYPE = "unknown"

#: the small name tables the details refer to
NAMES = {"classes": "SELECT id, name FROM resource_classes",
         "traits": "SELECT id, name FROM traits",
         "aggregates": "SELECT id, uuid FROM placement_aggregates",
         "consumer_types": "SELECT id, name FROM consumer_types"}


def for_dialect(sql: str, dialect: str) -> str:
    """``sql`` as the database ``dialect`` (SQLAlchemy's name for it) takes
    it: MySQL and MariaDB cast to a 64-bit integer with ``SIGNED``, BIGINT
    being no CAST type there (sqlite and PostgreSQL take BIGINT)."""
    if dialect in ("mysql", "mariadb"):
        return sql.replace(" AS BIGINT)", " AS SIGNED)")
    return sql
