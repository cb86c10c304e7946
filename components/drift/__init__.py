"""Whether the images a model is asked about still look like the ones it was checked on.

`signals.py` turns images and the model's answers into a few numbers per image,
`examples.py` reads them from stored examples, `reference.py` keeps those of the
eval split with the exported model, and `compare.py` calls a shift with TFDV's
drift comparators. `predict` runs the same signals over its own input.
"""
