"""Build the Keras-converted TFLite models of tests/frontends/tflite/test_keras_digits.py.

    python tests/data/make_keras_digits.py [OUT_DIR]     (default: this folder)

A Keras CNN (Conv2D, MaxPool, Conv2D, MaxPool, Flatten, Dense, softmax) with a
dynamic batch (input [None, 8, 8, 1]) trained on scikit-learn's digits, the
images with an even index (the odd ones are the test split), pixels as
tests/support/digits.py writes them (value*16, 0..255) scaled by 1/255. Its
Flatten on the dynamic batch leaves SHAPE -> STRIDED_SLICE -> PACK ->
RESHAPE in the converted model, which tpuc folds. Written with
`tf.lite.TFLiteConverter.from_keras_model`:

- keras_digits_float.tflite: float32;
- keras_digits_int8.tflite: full integer, int8 input and output
  (representative dataset: 300 training images);
- keras_digits_int8_float_io.tflite: full integer inside, float input and
  output (QUANTIZE/DEQUANTIZE at the edges).

TensorFlow is needed only here, never by tpuc or its tests (they read the
committed files): `pip install tensorflow-cpu scikit-learn` in a separate
venv (made with tensorflow-cpu 2.21.0, Keras 3.15.1). Prints the test-split
accuracy of Keras and of each file in LiteRT (TensorFlow's interpreter).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

SEED = 0
EPOCHS = 40


def digits() -> tuple[np.ndarray, np.ndarray]:
    """(images float32 [N, 8, 8, 1] in [0, 1], labels [N]) as tests/support/digits.py
    writes the PNGs (value*16 clipped to uint8) and SCALE (1/255) scales them."""
    from sklearn.datasets import load_digits

    data = load_digits()
    pixels = np.clip(data.images * 16, 0, 255).astype(np.uint8)
    return (pixels.astype(np.float32) / 255)[..., None], data.target.astype(np.int64)


def build(keras):
    layers = keras.layers
    return keras.Sequential(
        [
            keras.Input((8, 8, 1), name="image"),  # batch None: dynamic
            layers.Conv2D(16, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(10),
            layers.Softmax(),
        ]
    )


def convert(tf, model, x_train, integer: bool, int8_io: bool) -> bytes:
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if integer:

        def representative():
            for i in range(300):
                yield [x_train[i : i + 1]]

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if int8_io:
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
    return converter.convert()


def litert_accuracy(tf, data: bytes, x: np.ndarray, y: np.ndarray) -> float:
    interp = tf.lite.Interpreter(model_content=data)
    inp, out = interp.get_input_details()[0], interp.get_output_details()[0]
    interp.resize_tensor_input(inp["index"], list(x.shape))
    interp.allocate_tensors()
    if inp["dtype"] == np.int8:
        scale, zp = inp["quantization"]
        x = np.clip(np.round(x / scale) + zp, -128, 127).astype(np.int8)
    interp.set_tensor(inp["index"], x)
    interp.invoke()
    return float(np.mean(interp.get_tensor(out["index"]).argmax(-1) == y))


def main(out: Path) -> None:
    import tensorflow as tf
    from tensorflow import keras

    keras.utils.set_random_seed(SEED)
    tf.config.experimental.enable_op_determinism()
    x, y = digits()
    x_train, y_train, x_test, y_test = x[0::2], y[0::2], x[1::2], y[1::2]
    model = build(keras)
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x_train, y_train, epochs=EPOCHS, batch_size=32, verbose=0)
    print(f"keras: test accuracy {model.evaluate(x_test, y_test, verbose=0)[1]:.4f}")
    files = {
        "keras_digits_float.tflite": (False, False),
        "keras_digits_int8.tflite": (True, True),
        "keras_digits_int8_float_io.tflite": (True, False),
    }
    for name, (integer, int8_io) in files.items():
        data = convert(tf, model, x_train, integer, int8_io)
        (out / name).write_bytes(data)
        acc = litert_accuracy(tf, data, x_test, y_test)
        print(f"{name}: {len(data)} bytes, LiteRT test accuracy {acc:.4f}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent)
