"""How many images to send a model at once: a bound on pixels, not only on images.

A call holds the activations of every image it is sent (a gradient call keeps them
all for the backward pass), so its memory grows with the pixels, not the images: a
batch that is nothing for 8x8 digits is gigabytes for photos. Measured on a cnn_bn at
224x224 (docs/benchmarks.md, "Memory of a photo run"): XRAI sending 32 photos a call
took 1.4 GiB more than the rest of the Trainer; the drift reference's 64 photos a
call raised the process by 0.95 GiB. Eight 224x224 photos a call stay within about
0.2 GiB, and small images keep their larger batches.
"""

from __future__ import annotations

PIXELS_PER_CALL = 8 * 224 * 224


def images_per_call(image_shape: tuple[int, ...], most: int) -> int:
    """`most` images of a small shape, fewer as they grow (8 at 224x224), never fewer than one."""
    height, width = image_shape[:2]
    return max(1, min(most, PIXELS_PER_CALL // (height * width)))
