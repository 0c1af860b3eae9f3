"""Benchmark kinds: one module each, registered by one line in `registry.KIND_MODULES`.

A kind says how a source of it is recognised, compared (loaded into stores and
questions, judged, scored by its own measures), which options it takes and which
negatives it builds; `garden compare` and `garden ablate` dispatch through the registry
(`registry.compare_source`, `registry.kind_of`). See docs/extending.md, "Adding a kind".
"""
