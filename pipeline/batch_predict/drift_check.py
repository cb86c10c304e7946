"""The job's shift check: its records' drift signals against the model's reference, by TFDV.

The job computes the signals of every record it predicts (`components/drift/`) and
TFDV's statistics of them with `tfdv.GenerateStatistics`, on whichever runner runs
the job; the reference kept with the model gets its statistics in the same job, so
both sides are computed alike. After the job, `check_drift` reads both and
`tpu_pipeline.components.drift.compare` measures each signal. A model exported before it kept a
reference is predicted as before, and the check says it was not made.
"""

from __future__ import annotations

import dataclasses
import posixpath

import apache_beam as beam
import tensorflow_data_validation as tfdv

from tpu_pipeline.common.config import DatasetConfig, DriftConfig
from tpu_pipeline.components.drift.compare import DriftCheck, compare
from tpu_pipeline.components.drift.examples import example_signals, record_batch
from tpu_pipeline.components.drift.reference import (
    REFERENCE_PATH,
    DamagedReference,
    Reference,
    read_drift_reference,
)
from tpu_pipeline.components.drift.signals import with_unsure
from tpu_pipeline.pipeline.batch_predict.predictions import Predictions

_JOB_STATISTICS = "signal_statistics.pb"
_REFERENCE_STATISTICS = "reference_statistics.pb"


class _Signals(beam.DoFn):
    """A batch of predictions -> the drift signals of its records, as a TFDV record batch."""

    def __init__(self, dataset: DatasetConfig, low_confidence: float):
        self._dataset_json = dataset.model_dump_json()
        self._low_confidence = low_confidence

    def setup(self):
        self._dataset = DatasetConfig.model_validate_json(self._dataset_json)

    def process(self, predictions: Predictions):
        signals = example_signals(predictions.examples, predictions.probabilities, self._dataset)
        yield record_batch(with_unsure(signals, self._low_confidence))


@dataclasses.dataclass(frozen=True)
class DriftPlan:
    """What the job compares: the model's reference signals, and where both statistics go."""

    dataset: DatasetConfig
    drift: DriftConfig
    reference: Reference
    folder: str

    @classmethod
    def for_model(
        cls, model_dir: str, dataset: DatasetConfig, drift: DriftConfig, output: str
    ) -> DriftPlan | str:
        """The plan for the model in `model_dir`, writing beside `output`; or why there
        is none (no reference, or a damaged one: the job predicts all the same)."""
        try:
            reference = read_drift_reference(model_dir)
        except DamagedReference as error:
            return str(error)
        if reference is None:
            return f"{model_dir} keeps no {REFERENCE_PATH} (exported before drift references)"
        return cls(dataset, drift, reference, posixpath.dirname(output))

    def path(self, name: str) -> str:
        return posixpath.join(self.folder, name)

    def _reference_batch(self):
        """Both reference tables in one record batch: the training images' rows carry
        no prediction signal, the eval images' rows no image signal."""
        images, answers = self.reference.images, self.reference.answers
        answers = with_unsure(answers, self.drift.low_confidence)
        rows = len(next(iter(images.values())))
        return record_batch({**images, **answers}, missing={name: rows for name in answers})

    def add_statistics(self, pipeline: beam.Pipeline, predictions: beam.PCollection) -> None:
        """Adds both sides' statistics to the job."""
        low = self.drift.low_confidence
        _ = (
            predictions
            | "DriftSignals" >> beam.ParDo(_Signals(self.dataset, low))
            | "SignalStatistics" >> tfdv.GenerateStatistics()
            | "WriteSignalStatistics"
            >> tfdv.WriteStatisticsToBinaryFile(self.path(_JOB_STATISTICS))
        )
        _ = (
            pipeline
            | "Reference" >> beam.Create([self._reference_batch()])
            | "ReferenceStatistics" >> tfdv.GenerateStatistics()
            | "WriteReferenceStatistics"
            >> tfdv.WriteStatisticsToBinaryFile(self.path(_REFERENCE_STATISTICS))
        )


def check_drift(plan: DriftPlan | str) -> DriftCheck:
    """After the job: its records against the reference, or why they were not compared."""
    if isinstance(plan, str):
        return DriftCheck(0, "", note=plan)
    current = tfdv.load_stats_binary(plan.path(_JOB_STATISTICS))
    if not current.datasets or not current.datasets[0].num_examples:
        return DriftCheck(0, plan.reference.describe(), note="no record was predicted")
    reference = tfdv.load_stats_binary(plan.path(_REFERENCE_STATISTICS))
    return compare(current, reference, plan.drift, plan.reference.describe())
