"""Which calibration samples to run, and loading one of them.

run_calibration takes its samples from `--dataset DIR` (every image, .npy
or .npz below DIR) or `--data_list FILE` (one sample per line, one path per
input comma-separated, or a single .npz). Everything is listed and checked
before the first sample runs, so a bad line fails in a second rather than
after an hour of statistics. Samples are sorted by path: the same folder
always gives the same table.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tpuc.base.errors import TpucError
from tpuc.ir.preprocess import InputSpec, load_inputs

if TYPE_CHECKING:
    import numpy as np

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"})
SAMPLE_SUFFIXES = IMAGE_SUFFIXES | {".npy", ".npz"}


@dataclass(frozen=True)
class Sample:
    """One calibration sample: one path per model input, or a single .npz
    holding every input."""

    paths: tuple[str, ...]
    stacked: tuple[tuple[str, ...], ...] = ()
    """Batch-1 samples stacked into one batch after `paths` (see group_batches)."""

    @property
    def label(self) -> str:
        """The first file's name (for progress bars and messages)."""
        return Path(self.paths[0]).name

    @property
    def all_paths(self) -> tuple[str, ...]:
        return self.paths + tuple(p for paths in self.stacked for p in paths)


def list_samples(
    specs: Sequence[InputSpec],
    *,
    dataset: str | None,
    data_list: str | None,
    input_num: int,
    warn: Callable[[str], None],
    flag: str = "--data_list",
) -> list[Sample]:
    """The samples to calibrate with, checked and in a fixed order; the
    first `input_num` of them (0 = all). `flag` names the list file in
    errors (--data_list or --tune_list)."""
    if (dataset is None) == (data_list is None):
        raise TpucError("give exactly one of --dataset and --data_list")
    if input_num < 0:
        raise TpucError(f"--input_num must be 0 (all samples) or more, got {input_num}")
    if dataset is not None:
        samples = _dataset_samples(dataset, specs)
    else:
        samples = _listed_samples(data_list, specs, flag)
    if input_num == 0:
        return samples
    if input_num > len(samples):
        m = len(samples)
        warn(f"--input_num {input_num} is larger than the dataset ({m} samples): using all {m}")
        return samples
    return samples[:input_num]


def load_sample(sample: Sample, specs: Sequence[InputSpec]) -> dict[str, np.ndarray]:
    """The sample's input tensors (float32, keyed by input name), preprocessed
    as the model's inputs say; errors name the sample's file. A stacked sample
    is its batch-1 samples concatenated along the batch axis, in order."""
    import numpy as np

    if not sample.stacked:
        return load_inputs(list(sample.paths), specs)
    single = _batch_one(specs)
    parts = [load_inputs(list(p), single) for p in (sample.paths, *sample.stacked)]
    return {spec.name: np.concatenate([part[spec.name] for part in parts]) for spec in specs}


def group_batches(
    samples: Sequence[Sample], specs: Sequence[InputSpec], warn: Callable[[str], None]
) -> list[Sample]:
    """Samples for a module whose inputs have batch N > 1: unchanged when
    they hold whole batches; when they hold batch 1 (as TPU-MLIR accepts),
    every N consecutive samples (in listing order) are stacked into one batch.
    A remainder that does not fill a batch is left out, with a warning."""
    batch = _batch_of(specs)
    if batch <= 1 or not samples:
        return list(samples)
    try:
        load_inputs(list(samples[0].paths), specs)
        return list(samples)
    except TpucError as whole:
        try:
            load_inputs(list(samples[0].paths), _batch_one(specs))
        except TpucError:
            raise whole from None
    if len(samples) < batch:
        raise TpucError(
            f"{len(samples)} batch-1 sample(s) cannot fill one batch of {batch} "
            f"(the module's inputs have batch {batch})"
        )
    whole_batches = len(samples) // batch * batch
    if whole_batches < len(samples):
        warn(
            f"the last {len(samples) - whole_batches} sample(s) do not fill a batch of "
            f"{batch} and are not used"
        )
    return [
        Sample(samples[i].paths, tuple(s.paths for s in samples[i + 1 : i + batch]))
        for i in range(0, whole_batches, batch)
    ]


def _batch_of(specs: Sequence[InputSpec]) -> int:
    """The common batch (first dim) of every input, 1 when they differ."""
    batches = {spec.shape[0] if spec.shape else 1 for spec in specs}
    return batches.pop() if len(batches) == 1 else 1


def _batch_one(specs: Sequence[InputSpec]) -> list[InputSpec]:
    from dataclasses import replace

    return [replace(spec, shape=(1, *spec.shape[1:])) for spec in specs]


# --- --dataset ---------------------------------------------------------------------


def _dataset_samples(folder: str, specs: Sequence[InputSpec]) -> list[Sample]:
    root = Path(folder)
    if not root.exists():
        raise TpucError(f"--dataset {folder}: no such folder")
    if not root.is_dir():
        raise TpucError(f"--dataset {folder}: not a folder")
    files = _sample_files(root)
    if not files:
        raise TpucError(f"dataset folder {folder} holds no images, .npy or .npz files")
    if len(specs) > 1:
        other = next((f for f in files if f.suffix.lower() != ".npz"), None)
        if other is not None:
            raise TpucError(
                f"dataset folder {folder}: {other} is not an .npz; multi-input models "
                f"({_names(specs)}) need one .npz per sample (or use --data_list)"
            )
    return [Sample((str(f),)) for f in files]


def _sample_files(root: Path) -> list[Path]:
    """Files with a sample suffix below `root`, sorted; hidden files and
    folders (.git, macOS ._* copies) are skipped. Linked folders are
    followed, each real folder once (no loops, no duplicates)."""
    found = []
    seen = set()
    for folder, subfolders, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            subfolders[:] = []
            continue
        seen.add(real)
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        for name in names:
            path = Path(folder, name)
            if name.startswith(".") or path.suffix.lower() not in SAMPLE_SUFFIXES:
                continue
            if path.is_file():
                found.append(path)
    return sorted(found)


# --- --data_list -------------------------------------------------------------------


def _listed_samples(list_file: str, specs: Sequence[InputSpec], flag: str) -> list[Sample]:
    path = Path(list_file)
    if not path.is_file():
        what = "not a file" if path.is_dir() else "no such file"
        raise TpucError(f"{flag} {list_file}: {what}")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise TpucError(f"{flag} {list_file}: not a text file") from None
    except OSError as exc:
        raise TpucError(f"{flag} {list_file}: cannot read it ({exc.strerror})") from None
    samples = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line:
            samples.append(_listed_sample(line, f"{list_file}:{lineno}", path.parent, specs))
    if not samples:
        raise TpucError(f"{flag} {list_file} lists no samples")
    return samples


def _listed_sample(line: str, where: str, base: Path, specs: Sequence[InputSpec]) -> Sample:
    """One data-list line: paths checked for count and existence."""
    parts = [p.strip() for p in line.split(",")]
    if "" in parts:
        raise TpucError(f"{where}: empty path in '{line}'")
    single_npz = len(parts) == 1 and parts[0].lower().endswith(".npz")
    if not single_npz and len(parts) != len(specs):
        raise TpucError(
            f"{where}: {len(parts)} path(s) for a model with {len(specs)} input(s) "
            f"({_names(specs)}): give one path per input, comma-separated, or one .npz: '{line}'"
        )
    return Sample(tuple(_resolve(p, where, base) for p in parts))


def _resolve(path: str, where: str, base: Path) -> str:
    """`path` as given if it exists from the cwd, else relative to the list file."""
    if Path(path).is_file():
        return path
    beside = base / path
    if beside.is_file():
        return str(beside)
    if Path(path).is_dir() or beside.is_dir():
        raise TpucError(f"{where}: {path} is a folder; list one sample file per line")
    raise TpucError(f"{where}: no such file: {path}")


def _names(specs: Sequence[InputSpec]) -> str:
    return ", ".join(s.name for s in specs)
