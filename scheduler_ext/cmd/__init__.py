"""The ``scheduler-ext`` command (``main``) and its sub-commands, one module
each: ``simulate``, ``bench``, ``audit``. Operator tools; they may use the
lab tooling (``scheduler_ext.lab``)."""
