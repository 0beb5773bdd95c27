"""The ``scheduler-ext`` command (``main``, a cliff application) and its
sub-commands, one module each: ``simulate``, ``bench``, ``audit``,
``storage`` (discover, sync); ``base`` holds their conventions (exit
codes, one-line errors) and ``placement_access`` the one way they reach
placement. Operator tools; they may use the lab tooling
(``scheduler_ext.lab``); nothing a nova deployment runs imports them."""
