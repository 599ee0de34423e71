"""Turning test inputs (images, .npy, .npz) into the network's input tensors.

Images follow TPU-MLIR's preprocessing: load (Pillow), resize to
`resize_dims` (default: the input's H,W; a larger size is center-cropped
back to H,W), optionally keeping the aspect ratio (`letterbox`: fit inside
and pad with `pad_value`, centered or at the bottom/right;
`short_side_scale`: cover and center-crop), order the channels as
`pixel_format`, then `(x - mean) * scale` per channel and lay out as
`channel_format`. Arrays from .npy/.npz are used as they are, after their
names and shapes are checked.

The settings travel with the model: `annotate_input` stores them on the
`top.Input` op (as TPU-MLIR prints them) and `preprocess_of` reads them
back, so later tools (calibration, deploy) preprocess the same way.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tpuc.base.errors import TpucError

if TYPE_CHECKING:  # numpy is imported where used: `--help` must stay fast
    import numpy as np

PIXEL_FORMATS = ("rgb", "bgr", "gray", "rgba")
CHANNEL_FORMATS = ("nchw", "nhwc", "none")
KEEP_RATIO_MODES = ("letterbox", "short_side_scale")
PAD_TYPES = ("normal", "center")
_CHANNELS = {"gray": 1, "rgb": 3, "bgr": 3, "rgba": 4}
_PIL_MODE = {"gray": "L", "rgb": "RGB", "bgr": "RGB", "rgba": "RGBA"}


@dataclass(frozen=True)
class Preprocess:
    """How an image becomes one network input."""

    resize_dims: tuple[int, int] | None = None
    keep_aspect_ratio: bool = False
    keep_ratio_mode: str = "letterbox"
    pad_value: int = 0
    pad_type: str = "center"
    mean: tuple[float, ...] = (0.0, 0.0, 0.0)
    scale: tuple[float, ...] = (1.0, 1.0, 1.0)
    pixel_format: str = "bgr"
    channel_format: str = "nchw"


@dataclass(frozen=True)
class InputSpec:
    """One network input: its tensor name, static shape and preprocessing."""

    name: str
    shape: tuple[int, ...]
    preprocess: Preprocess | None = None


# --- command-line flags ---------------------------------------------------------


def add_preprocess_args(parser: argparse.ArgumentParser) -> None:
    """TPU-MLIR's preprocessing flags (applied to image test inputs)."""
    group = parser.add_argument_group("preprocessing (image inputs)")
    group.add_argument(
        "--resize_dims", metavar="H,W", help="resize images to H,W first (default: input H,W)"
    )
    group.add_argument(
        "--keep_aspect_ratio", action="store_true", help="resize keeping the aspect ratio"
    )
    group.add_argument(
        "--keep_ratio_mode",
        choices=KEEP_RATIO_MODES,
        default="letterbox",
        help="with --keep_aspect_ratio: fit and pad, or cover and crop (default letterbox)",
    )
    group.add_argument(
        "--pad_value", type=int, default=0, help="letterbox padding value (default 0)"
    )
    group.add_argument(
        "--pad_type",
        choices=PAD_TYPES,
        default="center",
        help="letterbox image placement: center, or top-left (normal) (default center)",
    )
    group.add_argument("--mean", default="0,0,0", help="per-channel mean (default 0,0,0)")
    group.add_argument("--scale", default="1,1,1", help="per-channel scale (default 1,1,1)")
    group.add_argument(
        "--pixel_format",
        choices=PIXEL_FORMATS,
        default="bgr",
        help="channel order the model expects (default bgr)",
    )
    group.add_argument(
        "--channel_format",
        choices=CHANNEL_FORMATS,
        default="nchw",
        help="input layout; none = not an image (default nchw)",
    )


def preprocess_from_args(args: argparse.Namespace) -> Preprocess:
    """The Preprocess the flags describe; malformed values are TpucErrors."""
    from tpuc.base.flag_values import parse_floats, parse_ints

    resize = None
    if args.resize_dims:
        h, w = parse_ints(args.resize_dims, "--resize_dims", count=2)
        if h <= 0 or w <= 0:
            raise TpucError(f"--resize_dims: sizes must be positive, got '{args.resize_dims}'")
        resize = (h, w)
    mean = tuple(parse_floats(args.mean, "--mean"))
    scale = tuple(parse_floats(args.scale, "--scale"))
    for flag, values in (("--mean", mean), ("--scale", scale)):
        if not values:
            raise TpucError(f"{flag}: expected at least one number")
    if not 0 <= args.pad_value <= 255:
        raise TpucError(f"--pad_value: expected a pixel value 0..255, got {args.pad_value}")
    return Preprocess(
        resize_dims=resize,
        keep_aspect_ratio=bool(args.keep_aspect_ratio),
        keep_ratio_mode=args.keep_ratio_mode,
        pad_value=int(args.pad_value),
        pad_type=args.pad_type,
        mean=mean,
        scale=scale,
        pixel_format=args.pixel_format,
        channel_format=args.channel_format,
    )


# --- the settings on top.Input ----------------------------------------------------


def image_layout(shape: Sequence[int], channel_format: str) -> tuple[int, int, int] | None:
    """(C, H, W) when an input of `shape` can take an image, else None
    (TPU-MLIR's rule: 4-D with at most 4 channels)."""
    if channel_format == "none" or len(shape) != 4:
        return None
    _, *dims = (int(d) for d in shape)
    c, h, w = dims if channel_format == "nchw" else (dims[2], dims[0], dims[1])
    return (c, h, w) if c <= 4 else None


def per_channel(values: Sequence[float], channels: int, flag: str, input_name: str) -> list[float]:
    """One value per channel: a single value (or all-equal values, such as
    the default 0,0,0) is repeated, extra ones dropped."""
    if len(set(values)) == 1:
        return [float(values[0])] * channels
    if len(values) < channels:
        raise TpucError(
            f"{flag} has {len(values)} values but input '{input_name}' has {channels} channels"
        )
    return [float(v) for v in values[:channels]]


def annotate_input(op, pp: Preprocess) -> bool:
    """Store `pp` on a top.Input op if its input can be an image; True if stored."""
    from tpuc.dialects.base import shape_of

    shape = shape_of(op.output)
    layout = image_layout(list(shape or ()), pp.channel_format)
    if layout is None:
        return False
    c, h, w = layout
    name = op.tensor_name.data
    attrs = {
        "channel_format": pp.channel_format,
        "pixel_format": pp.pixel_format,
        "resize_dims": list(pp.resize_dims or (h, w)),
        "keep_aspect_ratio": pp.keep_aspect_ratio,
        "mean": per_channel(pp.mean, c, "--mean", name),
        "scale": per_channel(pp.scale, c, "--scale", name),
    }
    if pp.keep_aspect_ratio:
        attrs.update(
            keep_ratio_mode=pp.keep_ratio_mode, pad_value=pp.pad_value, pad_type=pp.pad_type
        )
    for key, value in attrs.items():
        op.set_value(key, value)
    return True


def preprocess_of(op) -> Preprocess | None:
    """The Preprocess stored on a top.Input op (None if it has none)."""
    if op.attributes.get("pixel_format") is None:
        return None
    default = Preprocess()
    value = op.value
    resize = value("resize_dims")
    return Preprocess(
        resize_dims=tuple(resize) if resize else None,
        keep_aspect_ratio=bool(value("keep_aspect_ratio")),
        keep_ratio_mode=value("keep_ratio_mode") or default.keep_ratio_mode,
        pad_value=int(value("pad_value") or 0),
        pad_type=value("pad_type") or default.pad_type,
        mean=tuple(value("mean") or default.mean),
        scale=tuple(value("scale") or default.scale),
        pixel_format=value("pixel_format"),
        channel_format=value("channel_format") or default.channel_format,
    )


def input_specs(module) -> list[InputSpec]:
    """The inputs of a module's main function, in argument order."""
    from tpuc.dialects.base import shape_of
    from tpuc.dialects.top import InputOp

    specs = []
    for op in module.walk():
        if isinstance(op, InputOp):
            shape = shape_of(op.output)
            if shape is None:
                raise TpucError(f"input '{op.tensor_name.data}' has no static shape")
            specs.append(InputSpec(op.tensor_name.data, tuple(shape), preprocess_of(op)))
    return specs


# --- loading test inputs ---------------------------------------------------------


def load_inputs(paths: Sequence[str], specs: Sequence[InputSpec]) -> dict[str, np.ndarray]:
    """Input tensors (float32, keyed by input name) from a single .npz, or
    one file per input (.npy, .npz or an image), in input order."""
    if not paths:
        raise TpucError("no test input given")
    for path in paths:
        if Path(path).is_dir():
            raise TpucError(f"{path}: is a folder, not a sample file")
        if not Path(path).is_file():
            raise TpucError(f"{path}: no such file")
    if len(paths) == 1 and paths[0].lower().endswith(".npz"):
        return inputs_from_npz(_read_npz(paths[0]), specs, paths[0])
    if len(paths) != len(specs):
        names = ", ".join(s.name for s in specs)
        raise TpucError(
            f"{len(paths)} test input file(s) given for {len(specs)} model input(s) ({names}): "
            "give one file per input, comma-separated, or one .npz"
        )
    return {spec.name: _load_one(path, spec) for path, spec in zip(paths, specs, strict=True)}


def inputs_from_npz(
    data: Mapping[str, np.ndarray], specs: Sequence[InputSpec], source: str
) -> dict[str, np.ndarray]:
    """Pick each input by name from npz data, checking shapes."""
    inputs = {}
    for spec in specs:
        if spec.name not in data:
            have = ", ".join(list(data)[:8]) or "nothing"
            raise TpucError(
                f"{source}: no array named '{spec.name}' (model input of shape "
                f"{list(spec.shape)}); the file has: {have}"
            )
        inputs[spec.name] = _checked(data[spec.name], spec, source)
    return inputs


def _checked(array: np.ndarray, spec: InputSpec, source: str) -> np.ndarray:
    import numpy as np

    if array.dtype.kind not in "biuf":
        what = {"c": "complex numbers", "U": "strings", "S": "strings"}.get(
            array.dtype.kind, f"{array.dtype} values"
        )
        raise TpucError(f"{source}: input '{spec.name}' holds {what}; the model takes real numbers")
    if tuple(array.shape) != spec.shape:
        raise TpucError(
            f"{source}: input '{spec.name}' has shape {list(array.shape)}, "
            f"the model expects {list(spec.shape)}{_layout_hint(array.shape, spec.shape)}"
        )
    return np.require(array, np.float32, "C")  # keeps 0-d inputs 0-d


def _read_npz(path: str) -> dict[str, np.ndarray]:
    from tpuc.base.files import load_npz

    return load_npz(path)


def _load_one(path: str, spec: InputSpec) -> np.ndarray:
    import numpy as np

    suffix = Path(path).suffix.lower()
    if suffix == ".npy":
        try:
            array = np.load(path, allow_pickle=False)
        except PermissionError:
            raise TpucError(f"{path}: permission denied") from None
        except (OSError, ValueError) as exc:
            raise TpucError(f"{path}: not a readable .npy file ({exc})") from None
        return _checked(array, spec, path)
    if suffix == ".npz":
        data = _read_npz(path)
        if spec.name not in data and len(data) == 1:
            return _checked(next(iter(data.values())), spec, path)
        return inputs_from_npz(data, [spec], path)[spec.name]
    return load_image(path, spec)


def load_image(path: str, spec: InputSpec) -> np.ndarray:
    """An image file preprocessed into the tensor of input `spec`."""
    import numpy as np

    pp = spec.preprocess or Preprocess()
    layout = image_layout(list(spec.shape), pp.channel_format)
    if layout is None:
        raise TpucError(
            f"{path}: input '{spec.name}' of shape {list(spec.shape)} "
            f"({pp.channel_format}) does not take an image; give a .npy or .npz"
        )
    c, h, w = layout
    if _CHANNELS[pp.pixel_format] != c:
        raise TpucError(
            f"--pixel_format {pp.pixel_format} gives {_CHANNELS[pp.pixel_format]} channel(s) "
            f"but input '{spec.name}' has {c}"
        )
    pixels = _resized(_open_image(path, pp.pixel_format), (h, w), pp)
    x = pixels.astype(np.float32)
    if x.ndim == 2:
        x = x[:, :, None]
    if pp.pixel_format == "bgr":
        x = x[:, :, ::-1]
    mean = np.array(per_channel(pp.mean, c, "--mean", spec.name), dtype=np.float32)
    scale = np.array(per_channel(pp.scale, c, "--scale", spec.name), dtype=np.float32)
    x = (x - mean) * scale
    if pp.channel_format == "nchw":
        x = x.transpose(2, 0, 1)
    batch = np.repeat(x[None], spec.shape[0], axis=0)
    return np.ascontiguousarray(batch, dtype=np.float32)


def _open_image(path: str, pixel_format: str):
    from PIL import Image, UnidentifiedImageError

    bombs = (Image.DecompressionBombError, Image.DecompressionBombWarning)
    try:
        with warnings.catch_warnings():  # a "bomb" is never a calibration image
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                return image.convert(_PIL_MODE[pixel_format])
    except PermissionError:
        raise TpucError(f"{path}: permission denied") from None
    except (UnidentifiedImageError, *bombs, OSError, ValueError) as exc:
        reason = str(exc).split("\n")[0]
        raise TpucError(f"{path}: cannot read it as an image ({reason})") from None


def _resized(image, size: tuple[int, int], pp: Preprocess) -> np.ndarray:
    """Resize (and crop/pad) a PIL image to exactly `size` = (H, W) pixels."""
    h, w = size
    rh, rw = pp.resize_dims or size
    rh, rw = max(rh, h), max(rw, w)
    if not pp.keep_aspect_ratio:
        pixels = _resize(image, rw, rh)
    elif pp.keep_ratio_mode == "short_side_scale":
        pixels = _short_side_scale(image, rh, rw)
    else:
        pixels = _letterbox(image, rh, rw, pp)
    top, left = (rh - h) // 2, (rw - w) // 2
    return pixels[top : top + h, left : left + w]


def _resize(image, width: int, height: int) -> np.ndarray:
    import numpy as np
    from PIL import Image

    if image.size != (width, height):
        image = image.resize((width, height), Image.Resampling.BILINEAR)
    return np.asarray(image)


def _letterbox(image, h: int, w: int, pp: Preprocess) -> np.ndarray:
    import numpy as np

    iw, ih = image.size
    ratio = min(w / iw, h / ih)
    nw, nh = max(1, int(iw * ratio)), max(1, int(ih * ratio))
    pixels = _resize(image, nw, nh)
    canvas = np.full((h, w) + pixels.shape[2:], pp.pad_value, dtype=pixels.dtype)
    top, left = ((h - nh) // 2, (w - nw) // 2) if pp.pad_type == "center" else (0, 0)
    canvas[top : top + nh, left : left + nw] = pixels
    return canvas


def _short_side_scale(image, h: int, w: int) -> np.ndarray:

    iw, ih = image.size
    ratio = max(w / iw, h / ih)
    nw, nh = max(w, int(iw * ratio)), max(h, int(ih * ratio))
    pixels = _resize(image, nw, nh)
    top, left = (nh - h) // 2, (nw - w) // 2
    return pixels[top : top + h, left : left + w]


def with_preprocess(specs: Sequence[InputSpec], pp: Preprocess) -> list[InputSpec]:
    """The specs with `pp` for every input that has no stored preprocessing."""
    return [s if s.preprocess else replace(s, preprocess=pp) for s in specs]


def _layout_hint(given: Sequence[int], expected: Sequence[int]) -> str:
    """Name a 4-D array given in the other image layout (NCHW for an NHWC
    model such as a TFLite one, or the reverse)."""
    if len(given) != 4 or len(expected) != 4:
        return ""
    n, h, w, c = expected
    if tuple(given) == (n, c, h, w) and c not in (h, w):
        return " (that is NCHW; this model takes NHWC, its own layout)"
    n, c, h, w = expected
    if tuple(given) == (n, h, w, c) and c not in (h, w):
        return " (that is NHWC; this model takes NCHW)"
    return ""
