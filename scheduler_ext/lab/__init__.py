"""Lab tooling, never imported by what a nova deployment runs: a model of
nova's conductor and compute (``nova_model``), fleet builders (``fleet``,
``synthetic``), invariant checks (``invariants``), a reference engine in
plain Python (``reference``), local placement and PostgreSQL servers
(``placement_server``, ``postgres``), the scale-out run (``scaleout``) and
stock nova as the oracle of every move flow (``move_oracle`` and its
``move_*`` modules; the long sweep ``move_oracle_sweep``)."""
