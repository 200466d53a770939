"""Read-only analysis of a cluster (`liveanalysis`) or of a dump (`dumpfiles`).

Owns: nothing. May import: no runtime adapter.
"""
