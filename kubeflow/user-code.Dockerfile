# Adds a team's own model package (trainer.model: package.module:function) to one of the
# images (kubeflow/Dockerfile or kubeflow/tpu.Dockerfile). Build from the folder that holds
# the package:
#   docker build -f kubeflow/user-code.Dockerfile --build-arg BASE_IMAGE=$IMAGES/pipeline:0.1.0 \
#     -t $IMAGES/pipeline-team:0.1.0 /path/to/folder-holding-team_models
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

# The Trainer imports the model by name, so the package only has to be on the path.
COPY . /user_code
ENV PYTHONPATH=/user_code${PYTHONPATH:+:${PYTHONPATH}}
