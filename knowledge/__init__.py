"""Facts about the outside world (chart, driver matrix, RKE2, DCGM, metric names) as plain data.

The lowest layer: `config/` validates against it and `components/` builds from it, so it imports nothing
of the project's own.
"""
