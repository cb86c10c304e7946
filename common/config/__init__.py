"""The one typed, validated configuration of a tpu-pipeline run.

Everything a run can change lives here: the dataset, the Trainer's device and
model choices, the Evaluator's thresholds and where outputs go. A YAML file and
command-line flags both feed `load_config`, and every error names the field that
is wrong and what is allowed, so a typo fails in a second instead of an hour
into a TPU job.

Each section of the file has its own module, named as its key (`dataset.py` for
`dataset:`, ...); `pipeline.py` holds the whole and `loading.py` reads it. Import
from here, `from common.config import TrainerConfig`, not from the modules.
"""

from tpu_pipeline.common.config.base import REPO_ROOT, ConfigError
from tpu_pipeline.common.config.dataset import (
    BUILTIN_DATA_DIR,
    BUILTIN_DATASETS,
    DEFAULT_DATASET,
    DatasetConfig,
    SourceConfig,
    SplitPatterns,
)
from tpu_pipeline.common.config.drift import DriftConfig
from tpu_pipeline.common.config.evaluator import (
    PHOTO_SLICE_KINDS,
    BaselineTest,
    EvaluatorConfig,
    SliceKind,
)
from tpu_pipeline.common.config.explain import ExplainBaseline, ExplainConfig, ExplainMethod
from tpu_pipeline.common.config.loading import explicit_fields, load_config, user_dataset
from tpu_pipeline.common.config.notify import SECRET_VERSION_PATTERN, NotifyConfig
from tpu_pipeline.common.config.pipeline import (
    PHOTO_DEFAULT_IMAGE_SHAPE,
    PHOTO_DEFAULT_MODEL,
    PipelineConfig,
    require_vertex,
)
from tpu_pipeline.common.config.pruning import PruningConfig
from tpu_pipeline.common.config.secrets import (
    HIDDEN,
    SECRET_ERROR,
    SecretUrl,
    plain_credentials,
    url_host,
    webhook_url_problem,
)
from tpu_pipeline.common.config.serving import ServingConfig, TFLiteVariant
from tpu_pipeline.common.config.tracking import (
    MLFLOW_EXPERIMENT_NAME_ENV,
    MLFLOW_TRACKING_URI_ENV,
    VERTEX_EXPERIMENT_PATTERN,
    VERTEX_TENSORBOARD_PATTERN,
    TrackingConfig,
)
from tpu_pipeline.common.config.trainer import (
    FAST_CNN_RECIPE,
    MODEL_RECIPES,
    Accelerator,
    LearningRateDecay,
    LearningRateScaling,
    Optimizer,
    Precision,
    PromisedDevices,
    TrainerConfig,
    TrainingProcess,
    WeightAveraging,
)
from tpu_pipeline.common.config.tuner import (
    UNTUNABLE_TRAINER_FIELDS,
    SearchDimension,
    SearchValue,
    TunerConfig,
    TunerObjective,
)
from tpu_pipeline.common.config.vertex import (
    TPU_V5E_MACHINE_PREFIX,
    DataflowConfig,
    GcsUri,
    ModelRegistryConfig,
    ScheduleConfig,
    VertexConfig,
    VertexTrainerConfig,
)

__all__ = [
    "BUILTIN_DATASETS",
    "BUILTIN_DATA_DIR",
    "DEFAULT_DATASET",
    "FAST_CNN_RECIPE",
    "HIDDEN",
    "MLFLOW_EXPERIMENT_NAME_ENV",
    "MLFLOW_TRACKING_URI_ENV",
    "MODEL_RECIPES",
    "REPO_ROOT",
    "SECRET_ERROR",
    "SECRET_VERSION_PATTERN",
    "TPU_V5E_MACHINE_PREFIX",
    "UNTUNABLE_TRAINER_FIELDS",
    "VERTEX_EXPERIMENT_PATTERN",
    "VERTEX_TENSORBOARD_PATTERN",
    "Accelerator",
    "BaselineTest",
    "ConfigError",
    "DataflowConfig",
    "DatasetConfig",
    "DriftConfig",
    "EvaluatorConfig",
    "ExplainBaseline",
    "ExplainConfig",
    "ExplainMethod",
    "GcsUri",
    "LearningRateDecay",
    "LearningRateScaling",
    "ModelRegistryConfig",
    "NotifyConfig",
    "Optimizer",
    "PHOTO_DEFAULT_IMAGE_SHAPE",
    "PHOTO_DEFAULT_MODEL",
    "PHOTO_SLICE_KINDS",
    "PipelineConfig",
    "Precision",
    "PromisedDevices",
    "PruningConfig",
    "ScheduleConfig",
    "SecretUrl",
    "SearchDimension",
    "SearchValue",
    "ServingConfig",
    "SliceKind",
    "SourceConfig",
    "SplitPatterns",
    "TFLiteVariant",
    "TrackingConfig",
    "TrainerConfig",
    "TrainingProcess",
    "TunerConfig",
    "TunerObjective",
    "VertexConfig",
    "VertexTrainerConfig",
    "WeightAveraging",
    "explicit_fields",
    "load_config",
    "user_dataset",
    "plain_credentials",
    "require_vertex",
    "url_host",
    "webhook_url_problem",
]
