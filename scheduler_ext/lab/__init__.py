"""Lab tooling, never imported by what a nova deployment runs: a model of
nova's conductor and compute (``nova_model``), fleet builders (``fleet``,
``synthetic``), invariant checks (``invariants``), a reference engine in
plain Python (``reference``), local placement and PostgreSQL servers
(``placement_server``, ``postgres``) and the scale-out run (``scaleout``)."""
