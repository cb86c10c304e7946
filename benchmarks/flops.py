"""FLOP counting for the benchmarks: the product's own (`components/models/_flops.py`),
which the recipe also uses to plan a training budget."""

from tpu_pipeline.components.models._flops import (  # noqa: F401
    TRAINING_PASSES,
    forward_flops,
    layer_forward_flops,
    training_flops,
)
