"""What a TensorFlow model leaves in its process after it is done (``release``)."""

from __future__ import annotations


def release() -> None:
    """Drop Keras's global state (its layer-name counters, graph caches): the next point of a
    shared launch builds its model as a fresh process would, and memory does not grow."""
    import tensorflow as tf

    tf.keras.backend.clear_session()
