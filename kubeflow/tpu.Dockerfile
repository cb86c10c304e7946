# The TPU Trainer image: a Vertex AI custom job on TPU VMs (v2-8, v3-8, a v5e slice of one
# or several hosts) runs the Trainer executor in it. Build from the repository root:
#   docker build -f kubeflow/tpu.Dockerfile -t $REGION-docker.pkg.dev/$PROJECT/tpu-pipeline/trainer-tpu:0.1.0 .
# Every value below comes from kubeflow/tpu_image.py (a test checks they agree, and that
# TF_VERSION has the major.minor of tensorflow in requirements.lock).
# Vertex AI's TPU pod base image sets up the slice and then runs the container's CMD/args;
# so this file sets no ENTRYPOINT, and the TPU custom job passes TFX's executor command as
# `args` (kubeflow/tpu_job.py), never as `command`, which would skip that set-up.
ARG BASE_IMAGE=us-docker.pkg.dev/vertex-ai/training/tf-tpu-pod-base-cp310:latest
FROM ${BASE_IMAGE}

ARG TF_VERSION=2.16.1
ARG LIBTPU_VERSION=1.10.1
ARG TPU_ARTIFACTS=https://storage.googleapis.com/cloud-tpu-tpuvm-artifacts

ENV TF_USE_LEGACY_KERAS=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /pipeline
COPY requirements.lock setup.py ./
# The locked libraries, then the TPU build of TensorFlow in place of the CPU one.
RUN pip install -r requirements.lock \
    && pip install --no-deps --force-reinstall \
       "${TPU_ARTIFACTS}/tensorflow/tf-${TF_VERSION}/tensorflow-${TF_VERSION}-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
# TensorFlow finds libtpu in /lib on a TPU VM (fetched with Python: no curl needed).
RUN python -c "import sys, urllib.request; urllib.request.urlretrieve(*sys.argv[1:])" \
    "${TPU_ARTIFACTS}/libtpu/${LIBTPU_VERSION}/libtpu.so" /lib/libtpu.so
# TensorFlow trains on TPU v5e only through the PJRT runtime, which these two turn on.
ENV NEXT_PLUGGABLE_DEVICE_USE_C_API=true \
    TF_PLUGGABLE_DEVICE_LIBRARY_PATH=/lib/libtpu.so

COPY cli/ cli/
COPY common/ common/
COPY pipeline/ pipeline/
COPY components/ components/
COPY kubeflow/ kubeflow/
COPY schemas/ schemas/
RUN pip install --no-deps -e .
