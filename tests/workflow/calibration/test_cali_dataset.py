"""Listing and loading calibration samples (--dataset / --data_list)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from tpuc.base.errors import TpucError
from tpuc.ir.preprocess import InputSpec, Preprocess
from tpuc.workflow.calibration.dataset import (
    IMAGE_SUFFIXES,
    SAMPLE_SUFFIXES,
    Sample,
    list_samples,
    load_sample,
)

# One 1x3x2x2 image input: RGB, (x - 10) * 0.5
IMG_SPEC = InputSpec(
    "img", (1, 3, 2, 2), Preprocess(mean=(10.0,), scale=(0.5,), pixel_format="rgb")
)
A_SPEC = InputSpec("a", (1, 4), None)
B_SPEC = InputSpec("b", (2,), None)
TWO = [A_SPEC, B_SPEC]


def png(path, value: int):
    """A 2x2 RGB image whose pixels are (value, value + 1, value + 2)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.empty((2, 2, 3), np.uint8)
    pixels[...] = (value, value + 1, value + 2)
    Image.fromarray(pixels).save(path, format="PNG")
    return path


def npy(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, array)
    return path


def npz(path, **arrays):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return path


def listing(specs, warnings=None, **kwargs):
    kwargs.setdefault("dataset", None)
    kwargs.setdefault("data_list", None)
    kwargs.setdefault("input_num", 0)
    sink = warnings if warnings is not None else []
    return list_samples(specs, warn=sink.append, **kwargs)


def error_of(fn, *args, **kwargs) -> str:
    with pytest.raises(TpucError) as err:
        fn(*args, **kwargs)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_suffixes():
    assert sorted(IMAGE_SUFFIXES) == [".bmp", ".jpeg", ".jpg", ".png", ".tif", ".tiff", ".webp"]
    assert sorted(SAMPLE_SUFFIXES - IMAGE_SUFFIXES) == [".npy", ".npz"]
    assert IMAGE_SUFFIXES < SAMPLE_SUFFIXES


def test_sample_label():
    assert Sample(("/data/x/cat.jpg", "/data/y/b.npy")).label == "cat.jpg"


# --- --dataset ----------------------------------------------------------------------


@pytest.fixture
def mixed(tmp_path):
    """A single-input dataset: images, npy and npz, nested, plus files to skip."""
    root = tmp_path / "cali"
    png(root / "b.png", 20)
    png(root / "sub" / "deep" / "a.PNG", 30)  # suffix case does not matter
    npy(root / "c.npy", np.full((1, 3, 2, 2), 7.0, np.float64))
    npz(root / "a.npz", img=np.full((1, 3, 2, 2), -1.0, np.float32))
    (root / "notes.txt").write_text("not a sample")
    (root / "labels.json").write_text("{}")
    png(root / "._b.png", 0).write_bytes(b"AppleDouble junk")  # macOS copy artefact
    png(root / ".cache" / "z.png", 0)
    return root


def test_dataset_lists_every_sample_sorted_and_recursive(mixed):
    samples = listing([IMG_SPEC], dataset=str(mixed))
    rel = [str(s.paths[0]).removeprefix(str(mixed) + "/") for s in samples]
    assert rel == ["a.npz", "b.png", "c.npy", "sub/deep/a.PNG"]
    assert all(len(s.paths) == 1 for s in samples)
    assert samples[3].label == "a.PNG"


def test_dataset_samples_load(mixed):
    loaded = [load_sample(s, [IMG_SPEC]) for s in listing([IMG_SPEC], dataset=str(mixed))]
    for inputs in loaded:
        assert list(inputs) == ["img"]
        assert inputs["img"].dtype == np.float32 and inputs["img"].shape == (1, 3, 2, 2)
    np.testing.assert_array_equal(loaded[0]["img"], np.full((1, 3, 2, 2), -1.0))
    # b.png: R,G,B = 20,21,22 -> (x - 10) * 0.5 = 5, 5.5, 6 per channel (RGB, NCHW)
    expected = np.broadcast_to(np.array([5.0, 5.5, 6.0]).reshape(1, 3, 1, 1), (1, 3, 2, 2))
    np.testing.assert_array_equal(loaded[1]["img"], expected)
    np.testing.assert_array_equal(loaded[2]["img"], np.full((1, 3, 2, 2), 7.0))
    np.testing.assert_array_equal(loaded[3]["img"], expected + 5.0)  # 30,31,32


@pytest.mark.parametrize(("input_num", "count"), [(0, 4), (1, 1), (3, 3), (4, 4)])
def test_input_num_takes_the_first_n(mixed, input_num, count):
    warnings = []
    samples = listing([IMG_SPEC], warnings, dataset=str(mixed), input_num=input_num)
    assert samples == listing([IMG_SPEC], dataset=str(mixed))[:count]
    assert warnings == []


def test_input_num_larger_than_dataset_warns_and_uses_all(mixed):
    warnings = []
    samples = listing([IMG_SPEC], warnings, dataset=str(mixed), input_num=10)
    assert len(samples) == 4
    assert warnings == ["--input_num 10 is larger than the dataset (4 samples): using all 4"]


def test_negative_input_num(mixed):
    message = error_of(listing, [IMG_SPEC], dataset=str(mixed), input_num=-1)
    assert message == "--input_num must be 0 (all samples) or more, got -1"


def test_multi_input_dataset_one_npz_per_sample(tmp_path):
    for i in (2, 0, 1):
        npz(tmp_path / f"s{i}.npz", a=np.full((1, 4), i, np.float32), b=np.array([i, -i]))
    samples = listing(TWO, dataset=str(tmp_path))
    assert [s.label for s in samples] == ["s0.npz", "s1.npz", "s2.npz"]
    inputs = load_sample(samples[2], TWO)
    np.testing.assert_array_equal(inputs["a"], np.full((1, 4), 2.0))
    np.testing.assert_array_equal(inputs["b"], np.array([2.0, -2.0]))
    assert inputs["b"].dtype == np.float32


def test_multi_input_dataset_refuses_other_files(tmp_path):
    npz(tmp_path / "s0.npz", a=np.zeros((1, 4)), b=np.zeros(2))
    npy(tmp_path / "s1.npy", np.zeros((1, 4)))
    message = error_of(listing, TWO, dataset=str(tmp_path))
    assert message == (
        f"dataset folder {tmp_path}: {tmp_path / 's1.npy'} is not an .npz; multi-input "
        "models (a, b) need one .npz per sample (or use --data_list)"
    )


def test_dataset_folder_errors(tmp_path):
    missing = tmp_path / "nope"
    assert error_of(listing, [IMG_SPEC], dataset=str(missing)) == (
        f"--dataset {missing}: no such folder"
    )
    a_file = png(tmp_path / "x.png", 1)
    assert error_of(listing, [IMG_SPEC], dataset=str(a_file)) == (
        f"--dataset {a_file}: not a folder"
    )
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "readme.txt").write_text("hi")
    assert error_of(listing, [IMG_SPEC], dataset=str(empty)) == (
        f"dataset folder {empty} holds no images, .npy or .npz files"
    )


def test_exactly_one_source(tmp_path):
    expected = "give exactly one of --dataset and --data_list"
    assert error_of(listing, [IMG_SPEC]) == expected
    assert error_of(listing, [IMG_SPEC], dataset=str(tmp_path), data_list="x.txt") == expected


# --- --data_list --------------------------------------------------------------------


@pytest.fixture
def two_input_files(tmp_path):
    data = tmp_path / "data"
    for i in range(3):
        npy(data / f"a{i}.npy", np.full((1, 4), i, np.float32))
        npy(data / f"b{i}.npy", np.array([i, 10 * i], np.float32))
    npz(data / "both.npz", a=np.ones((1, 4)), b=np.array([5.0, 6.0]))
    return data


def test_data_list_comma_separated_per_input(tmp_path, two_input_files, monkeypatch):
    listed = tmp_path / "lists" / "cali.txt"
    listed.parent.mkdir()
    data = two_input_files
    listed.write_text(
        f"{data / 'a2.npy'},{data / 'b2.npy'}\n"  # absolute paths
        "\n"
        "   ../data/a0.npy , ../data/b0.npy  \n"  # relative to the list file, spaces trimmed
        "data/a1.npy,data/b1.npy\n"  # relative to the cwd
        "../data/both.npz\n"  # one npz holds every input
    )
    monkeypatch.chdir(tmp_path)
    samples = listing(TWO, data_list=str(listed))
    assert [s.label for s in samples] == ["a2.npy", "a0.npy", "a1.npy", "both.npz"]
    assert samples[2].paths == ("data/a1.npy", "data/b1.npy")
    loaded = [load_sample(s, TWO) for s in samples]
    assert [float(x["b"][1]) for x in loaded] == [20.0, 0.0, 10.0, 6.0]
    np.testing.assert_array_equal(loaded[0]["a"], np.full((1, 4), 2.0))
    assert listing(TWO, data_list=str(listed), input_num=2) == samples[:2]


def test_data_list_single_input_images(tmp_path):
    png(tmp_path / "imgs" / "n00.jpeg.png", 40)
    (tmp_path / "list.txt").write_text("imgs/n00.jpeg.png\n")
    (sample,) = listing([IMG_SPEC], data_list=str(tmp_path / "list.txt"))
    x = load_sample(sample, [IMG_SPEC])["img"]
    np.testing.assert_array_equal(x[0, :, 0, 0], [15.0, 15.5, 16.0])


def test_data_list_wrong_path_count(tmp_path, two_input_files):
    listed = tmp_path / "cali.txt"
    listed.write_text("data/both.npz\ndata/a0.npy\n")
    assert error_of(listing, TWO, data_list=str(listed)) == (
        f"{listed}:2: 1 path(s) for a model with 2 input(s) (a, b): give one path per input, "
        "comma-separated, or one .npz: 'data/a0.npy'"
    )
    listed.write_text("data/a0.npy,data/b0.npy,data/b1.npy\n")
    assert error_of(listing, TWO, data_list=str(listed)).startswith(
        f"{listed}:1: 3 path(s) for a model with 2 input(s)"
    )


def test_data_list_missing_file(tmp_path, two_input_files):
    listed = tmp_path / "cali.txt"
    listed.write_text("data/a0.npy,data/b0.npy\n\ndata/a1.npy,data/gone.npy\n")
    assert error_of(listing, TWO, data_list=str(listed)) == (
        f"{listed}:3: no such file: data/gone.npy"
    )


def test_data_list_empty_path(tmp_path, two_input_files):
    listed = tmp_path / "cali.txt"
    listed.write_text("data/a0.npy,\n")
    assert error_of(listing, TWO, data_list=str(listed)) == (
        f"{listed}:1: empty path in 'data/a0.npy,'"
    )


def test_data_list_file_errors(tmp_path):
    missing = tmp_path / "nope.txt"
    assert error_of(listing, [IMG_SPEC], data_list=str(missing)) == (
        f"--data_list {missing}: no such file"
    )
    assert error_of(listing, [IMG_SPEC], data_list=str(tmp_path)) == (
        f"--data_list {tmp_path}: not a file"
    )
    empty = tmp_path / "empty.txt"
    empty.write_text("\n   \n")
    assert error_of(listing, [IMG_SPEC], data_list=str(empty)) == (
        f"--data_list {empty} lists no samples"
    )


# --- load_sample errors name the file -----------------------------------------------


def test_npz_missing_an_input(tmp_path):
    path = npz(tmp_path / "s.npz", a=np.zeros((1, 4), np.float32), c=np.zeros(2))
    (sample,) = listing(TWO, dataset=str(tmp_path))
    message = error_of(load_sample, sample, TWO)
    assert message == (f"{path}: no array named 'b' (model input of shape [2]); the file has: a, c")


def test_npy_with_wrong_shape(tmp_path):
    path = npy(tmp_path / "x.npy", np.zeros((1, 3, 4, 4), np.float32))
    (sample,) = listing([IMG_SPEC], dataset=str(tmp_path))
    assert error_of(load_sample, sample, [IMG_SPEC]) == (
        f"{path}: input 'img' has shape [1, 3, 4, 4], the model expects [1, 3, 2, 2]"
    )


def test_image_for_a_non_image_input(tmp_path):
    path = png(tmp_path / "x.png", 1)
    (sample,) = listing([A_SPEC], dataset=str(tmp_path))
    message = error_of(load_sample, sample, [A_SPEC])
    assert message.startswith(f"{path}: input 'a' of shape [1, 4]")


def test_unreadable_image(tmp_path):
    path = tmp_path / "broken.jpg"
    path.write_bytes(b"not a jpeg")
    (sample,) = listing([IMG_SPEC], dataset=str(tmp_path))
    assert error_of(load_sample, sample, [IMG_SPEC]).startswith(
        f"{path}: cannot read it as an image"
    )


def test_linked_folders_are_followed_once(tmp_path):
    real = tmp_path / "real"
    png(real / "x.png", 1)
    root = tmp_path / "cali"
    png(root / "y.png", 2)
    (root / "link").symlink_to(real, target_is_directory=True)
    (root / "link2").symlink_to(real, target_is_directory=True)
    (real / "loop").symlink_to(root, target_is_directory=True)  # a cycle back up
    samples = listing([IMG_SPEC], dataset=str(root))
    assert [s.paths[0] for s in samples] == [str(root / "link" / "x.png"), str(root / "y.png")]


def test_data_list_with_bom(tmp_path):
    png(tmp_path / "a.png", 1)
    (tmp_path / "list.txt").write_bytes(b"\xef\xbb\xbfa.png\n")
    (sample,) = listing([IMG_SPEC], data_list=str(tmp_path / "list.txt"))
    assert sample.paths == (str(tmp_path / "a.png"),)


def test_data_list_naming_a_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "list.txt").write_text("sub\n")
    message = error_of(listing, [IMG_SPEC], data_list=str(tmp_path / "list.txt"))
    assert message == f"{tmp_path / 'list.txt'}:1: sub is a folder; list one sample file per line"


def test_decompression_bomb_in_dataset(tmp_path):
    from bad_inputs import gif_bomb

    path = gif_bomb(tmp_path / "x.jpg")
    (sample,) = listing([IMG_SPEC], dataset=str(tmp_path))
    assert error_of(load_sample, sample, [IMG_SPEC]) == (
        f"{path}: cannot read it as an image (Image size (4294836225 pixels) exceeds limit of "
        "178956970 pixels, could be decompression bomb DOS attack.)"
    )
