"""Image ops in TensorFlow that Transform, the training input and serving share.

One definition of decode, resize and scale, so training and serving cannot
treat an image differently.
"""
