# The TPU Trainer image: a Vertex AI custom job on a TPU VM (v2-8, v3-8, v5e) runs the
# Trainer executor in it. Build from the repository root:
#   docker build -f kubeflow/tpu.Dockerfile -t $REGION-docker.pkg.dev/$PROJECT/tpu-pipeline/trainer-tpu:0.1.0 .
# TPU VMs need TensorFlow built for them and the matching libtpu (Vertex AI "Training with
# TPU accelerators"; pairs are listed in Cloud TPU's "Supported TPU configurations").
# TF_VERSION must have the major.minor of tensorflow in requirements.lock (a test checks).
FROM python:3.10-slim

ARG TF_VERSION=2.16.1
ARG LIBTPU_VERSION=1.10.1
ARG TPU_ARTIFACTS=https://storage.googleapis.com/cloud-tpu-tpuvm-artifacts

ENV TF_USE_LEGACY_KERAS=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1

RUN apt-get update && apt-get install -y --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /pipeline
COPY requirements.lock setup.py ./
# The locked libraries, then the TPU build of TensorFlow in place of the CPU one.
RUN pip install -r requirements.lock \
    && pip install --no-deps --force-reinstall \
       "${TPU_ARTIFACTS}/tensorflow/tf-${TF_VERSION}/tensorflow-${TF_VERSION}-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
# TensorFlow finds libtpu in /lib on a TPU VM.
RUN curl -fsSL -o /lib/libtpu.so "${TPU_ARTIFACTS}/libtpu/${LIBTPU_VERSION}/libtpu.so"
# TensorFlow trains on TPU v5e only through the PJRT runtime, which these two variables
# turn on (Vertex AI "Training with TPU accelerators", custom container; Cloud TPU
# "TPU software versions", PJRT support). v2/v3 images were not checked with them.
ENV NEXT_PLUGGABLE_DEVICE_USE_C_API=true \
    TF_PLUGGABLE_DEVICE_LIBRARY_PATH=/lib/libtpu.so

COPY cli/ cli/
COPY common/ common/
COPY pipeline/ pipeline/
COPY components/ components/
COPY kubeflow/ kubeflow/
COPY schemas/ schemas/
RUN pip install --no-deps -e .
