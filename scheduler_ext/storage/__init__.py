"""Shared storage from the real topology (nova-free; uses the placement
client and nothing above it).

* ``mountinfo``: where a path lives (mountinfo and fstab parsing,
  stacked and bind mounts, longest whole-component match);
* ``filesystems``: filesystem classes and the storage a mount names;
* ``probe`` / ``timebox``: time-boxed stat/statfs (in a thread or a
  forked child) and the shared-directory tokens;
* ``discover`` / ``report``: one host's report and its JSON form;
* ``topology``: reports -> one sharing provider per filesystem;
* ``sync`` / ``fleet``: applying that to placement, idempotently;
* ``livemigration``: the live-migration type nova will choose;
* ``fencing_policy`` / ``evacuation``: quorum-safe fencing and evacuation;
* ``compute_api``, ``livemigration_check``, ``evacuation_run``: the
  planners on nova's compute API;
* ``identity``: what the cluster says a filesystem is;
* ``diskmigration``: the DISK_GB data migration (nova bug 1784020).
"""
