"""Shared storage from the real topology (nova-free; uses the placement
client and nothing above it).

* ``mountinfo``: where a path lives (mountinfo and fstab parsing,
  stacked and bind mounts, longest whole-component match);
* ``filesystems``: filesystem classes and the storage a mount names;
* ``probe`` / ``timebox``: time-boxed stat/statfs (in a thread or a
  forked child) and the shared-directory tokens;
* ``discover`` / ``report``: one host's report and its JSON form;
* ``topology``: reports -> one sharing provider per storage domain;
* ``sync`` / ``fleet``: applying that to placement, idempotently;
* ``livemigration``: the live-migration type nova will choose;
* ``evacuation``: quorum-safe fencing and evacuation.
"""
