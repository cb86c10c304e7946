"""Temperature scaling (Guo et al., 2017): one number that makes the served probabilities
mean what they say, fitted on the eval split's answers.

The served model's probabilities p become softmax(log p / T). T > 1 softens an
overconfident model, T < 1 sharpens a timid one; the ranking of the classes, so the
predicted class and every accuracy, stays the same. T is the value that minimises the
negative log-likelihood of the labels (the standard fit), searched over log T; it is
applied only if it also lowers the expected calibration error, measured as the
Evaluator measures it (ten equal buckets of the top probability), so an opt-in never
makes the probabilities worse by the figure the report shows.

The fit and the error are measured on the same eval examples, and the Evaluator later
measures the served model on the eval split too: the error after scaling is on examples
the temperature was fitted to (one parameter, so the optimism is small, but it is there).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tf_keras
from scipy import optimize

from tpu_pipeline.components.models import PROBABILITIES_LAYER

# Where the fit is recorded in the model's training_info.json (the run summary's `trainer`).
TEMPERATURE_INFO_KEY = "temperature_scaling"
# The range searched: far beyond what a trained classifier needs either way.
LOWEST, HIGHEST = 0.05, 20.0
CALIBRATION_BUCKETS = 10
# Probabilities are clipped here before the log: a float32 softmax gives exact zeros.
_TINY = 1e-12


@dataclasses.dataclass(frozen=True)
class TemperatureFit:
    """What fitting the temperature found, and whether the served model applies it."""

    temperature: float
    examples: int
    calibration_error_before: float
    calibration_error_after: float

    @property
    def applied(self) -> bool:
        return self.calibration_error_after < self.calibration_error_before

    def as_json(self) -> dict:
        return {**dataclasses.asdict(self), "applied": self.applied}

    @classmethod
    def from_json(cls, recorded: dict) -> TemperatureFit:
        return cls(**{field.name: recorded[field.name] for field in dataclasses.fields(cls)})

    def describe(self) -> str:
        """One line: the temperature, the error before and after, and whether it is served."""
        served = "served" if self.applied else "not applied: it would not lower the error"
        return (
            f"temperature scaling: T={self.temperature:.3f} fitted on {self.examples:,} eval "
            f"examples, expected calibration error {self.calibration_error_before:.4f} -> "
            f"{self.calibration_error_after:.4f} ({served})"
        )


def rescale(probabilities: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(log p / T) of each row, in float64."""
    logits = np.log(np.clip(probabilities.astype(np.float64), _TINY, None)) / temperature
    logits -= logits.max(axis=1, keepdims=True)
    scaled = np.exp(logits)
    return scaled / scaled.sum(axis=1, keepdims=True)


def with_temperature(model: tf_keras.Model, temperature: float) -> tf_keras.Model:
    """`model` answering softmax(logits / T), which is `rescale` of its probabilities.

    Every model ends in the float32 softmax `build_model` adds (`probabilities`), whose
    input is the logits: the scaled model divides them first, with Keras's own layers,
    so the served SavedModel loads as Keras anywhere (the Evaluator, a warm start).
    """
    logits = model.get_layer(PROBABILITIES_LAYER).input
    scaled = tf_keras.layers.Rescaling(1 / temperature, dtype="float32", name="temperature")(logits)
    probabilities = tf_keras.layers.Activation(
        "softmax", dtype="float32", name="scaled_probabilities"
    )(scaled)
    return tf_keras.Model(model.inputs, probabilities, name=model.name)


def calibration_error(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """Expected calibration error of the top probability: over CALIBRATION_BUCKETS equal
    buckets (and a top probability of exactly 1.0 in one of its own, as in TFMA's
    calibration plot), |right - sum of top probabilities| summed, divided by the examples."""
    top = probabilities.max(axis=1)
    right = probabilities.argmax(axis=1) == labels
    bucket = np.minimum((top * CALIBRATION_BUCKETS).astype(int), CALIBRATION_BUCKETS)
    gaps = sum(abs(right[bucket == b].sum() - top[bucket == b].sum()) for b in np.unique(bucket))
    return float(gaps / len(labels))


def _negative_log_likelihood(probabilities: np.ndarray, labels: np.ndarray, t: float) -> float:
    chosen = rescale(probabilities, t)[np.arange(len(labels)), labels]
    return float(-np.log(np.clip(chosen, _TINY, None)).mean())


def fit_temperature(probabilities: np.ndarray, labels: np.ndarray) -> TemperatureFit:
    """The temperature that best explains `labels` given the model's `probabilities`.

    Raises:
      ValueError: no examples to fit on.
    """
    if len(labels) == 0:
        raise ValueError("temperature scaling needs eval examples; the eval split has none")
    found = optimize.minimize_scalar(
        lambda log_t: _negative_log_likelihood(probabilities, labels, float(np.exp(log_t))),
        bounds=(np.log(LOWEST), np.log(HIGHEST)),
        method="bounded",
    )
    temperature = float(np.exp(found.x))
    return TemperatureFit(
        temperature=temperature,
        examples=len(labels),
        calibration_error_before=calibration_error(probabilities, labels),
        calibration_error_after=calibration_error(rescale(probabilities, temperature), labels),
    )
