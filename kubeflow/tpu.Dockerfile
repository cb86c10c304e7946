# The TPU Trainer image: a Vertex AI custom job on TPU VMs (v2-8, v3-8, a v5e slice of one
# or several hosts) runs the Trainer executor in it. Build from the repository root:
#   ARGS=$(python -m tpu_pipeline.kubeflow.tpu_image) && docker build $ARGS -f kubeflow/tpu.Dockerfile -t $REGION-docker.pkg.dev/$PROJECT/tpu-pipeline/trainer-tpu:0.1.0 .
# Every value below comes from kubeflow/tpu_image.py (a test checks they agree, and that
# TF_VERSION is the tensorflow of requirements.lock). The base image is pulled by digest and
# every file downloaded is checked by sha256. The base image's digest and libtpu's hash are
# recorded in kubeflow/tpu-image.lock on the first build that reaches the registries and
# checked on every later one; `python -m tpu_pipeline.kubeflow.tpu_image` prints them as the --build-arg
# flags. Without them the defaults (UNSET) fail the build (the digest as an invalid
# reference, the hash in the first RUN).
# Vertex AI's TPU pod base image sets up the slice and then runs the container's CMD/args;
# so this file sets no ENTRYPOINT, and the TPU custom job passes TFX's executor command as
# `args` (kubeflow/tpu_job.py), never as `command`, which would skip that set-up.
ARG BASE_IMAGE=us-docker.pkg.dev/vertex-ai/training/tf-tpu-pod-base-cp310@sha256:UNSET
FROM ${BASE_IMAGE}

ARG TF_VERSION=2.16.2
ARG TF_TPU_WHEEL_SHA256=9bc3d42686bc9f3144a4332effa434b78bc639692abd63737f3b00e099aa884d
ARG LIBTPU_VERSION=1.10.1
ARG LIBTPU_SHA256=UNSET

ENV TF_USE_LEGACY_KERAS=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1

RUN for pin in TF_TPU_WHEEL_SHA256=${TF_TPU_WHEEL_SHA256} LIBTPU_SHA256=${LIBTPU_SHA256}; do \
      case "${pin}" in *=UNSET|*=) echo "kubeflow/tpu.Dockerfile: ${pin%%=*} is not set; pass the --build-arg flags python -m tpu_pipeline.kubeflow.tpu_image prints" >&2; exit 1;; esac; \
    done

WORKDIR /pipeline
COPY requirements.lock setup.py ./
# The locked libraries, then TensorFlow's TPU build of the same version in place of the CPU
# one, accepted only with the sha256 PyPI lists for it.
RUN pip install -r requirements.lock \
    && pip uninstall -y tensorflow \
    && echo "tensorflow-tpu==${TF_VERSION} --hash=sha256:${TF_TPU_WHEEL_SHA256}" > /tmp/tensorflow-tpu.txt \
    && pip install --no-deps --only-binary=:all: --require-hashes -r /tmp/tensorflow-tpu.txt \
    && rm /tmp/tensorflow-tpu.txt
# TensorFlow finds libtpu in /lib on a TPU VM (fetched with Python: no curl needed).
RUN python -c "import sys, urllib.request; urllib.request.urlretrieve(*sys.argv[1:])" \
    "https://storage.googleapis.com/cloud-tpu-tpuvm-artifacts/libtpu/${LIBTPU_VERSION}/libtpu.so" /lib/libtpu.so \
    && echo "${LIBTPU_SHA256}  /lib/libtpu.so" | sha256sum -c -
# TensorFlow trains on TPU v5e only through the PJRT runtime, which these two turn on.
ENV NEXT_PLUGGABLE_DEVICE_USE_C_API=true \
    TF_PLUGGABLE_DEVICE_LIBRARY_PATH=/lib/libtpu.so

COPY cli/ cli/
COPY common/ common/
COPY pipeline/ pipeline/
COPY components/ components/
COPY tpu_pipeline/ tpu_pipeline/
COPY serving_ops/ serving_ops/
COPY kubeflow/ kubeflow/
COPY schemas/ schemas/
RUN pip install --no-deps -e .
