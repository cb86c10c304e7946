"""The run summary's parts, one module per room that produces the facts (`summary_part.py`).

Every module here is imported by `pipeline/results/run_summary.py`, and every
`@summary_part` class in it becomes part of `RunSummary`: add a module (or a key to a
room's part) for a new fact; nothing else names it.
"""
