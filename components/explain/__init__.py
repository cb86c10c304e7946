"""Why the exported model decided: attribution maps of its answers (PAIR's `saliency`).

`choice.py` picks what to explain, `gradients.py` turns the served `pixels`
signature into the function the methods call, `maps.py` runs the methods,
`store.py` keeps the maps in the Explainer's artifact (read back without TensorFlow),
`eval_split.py` is the Explainer's step (`components/explainer.py`).
"""
