"""nova's own move tests that pass with nova's scheduler and fail with
scheduler-ext's, each with the reason (README.rst, "nova's own tests",
states the same). ``test_nova_functional`` fails if a test differs that is
not listed here, or if a listed one no longer differs."""

KNOWN_DIFFERENCES: dict[str, str] = {}
