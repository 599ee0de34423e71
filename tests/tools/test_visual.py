"""visual.py: its page in a real browser (Debian's chromium driven by
selenium), the --static page the same way, and its bad-input errors."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import urllib.request

import numpy as np
import pytest

from tests.support.digits import SCALE, digits_arrays, linear_classifier
from tests.support.tools_helpers import conv_model, one_line_error, run_main
from tpuc.tools import model_deploy, model_transform, run_calibration, visual

TIGHT = "0.99999,0.99999"  # INT8 falls below it somewhere: the first layer is highlighted


@pytest.fixture(scope="module")
def digits_int8(tmp_path_factory):
    from PIL import Image

    work = tmp_path_factory.mktemp("visual")
    images, _ = digits_arrays()
    cali = work / "cali"
    cali.mkdir()
    for i in range(20):
        Image.fromarray(images[i], mode="L").save(cali / f"{i:02d}.png")
    linear_classifier(work / "d.onnx", batch=1)
    argv = [
        "--model_name",
        "d",
        "--model_def",
        str(work / "d.onnx"),
        "--mlir",
        str(work / "d.mlir"),
    ]
    argv += ["--pixel_format", "gray", "--scale", repr(SCALE)]
    assert model_transform.run(argv) == 0
    table = str(work / "d_cali")
    assert run_calibration.run([str(work / "d.mlir"), "--dataset", str(cali), "-o", table]) == 0
    argv = ["--mlir", str(work / "d.mlir"), "--quantize", "INT8", "--chip", "bm1684x"]
    argv += ["--calibration_table", table, "--model", str(work / "d.bmodel")]
    assert model_deploy.run(argv) == 0
    return work, work / "d.mlir", work / "d_bm1684x_int8_sym_tpu.mlir", str(cali / "07.png")


def browser():
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.skip(
            "Debian's chromium and chromium-driver are not installed; .ci/run installs them "
            "(apt-get install -y chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(driver))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_page(driver, url: str, tensors: list[str], shot, manual: bool = False) -> None:
    """Every tensor listed with its similarity; a click plots that tensor.
    `manual`: the networks run only when the Run button is pressed."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    if manual:
        assert not driver.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
        driver.find_element(By.ID, "run").click()
    WebDriverWait(driver, 60).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
    )
    assert driver.find_elements(By.CSS_SELECTOR, "#graph .main-svg"), "the graph was not drawn"
    rows = driver.find_elements(By.CSS_SELECTOR, "tr.tensor-row")
    assert [r.get_attribute("data-name") for r in rows] == tensors
    for row in rows:
        if "only-quant" not in row.get_attribute("class"):
            float(row.find_element(By.CSS_SELECTOR, "td.cosine").text)  # a number, not n/a
    first = driver.find_element(By.ID, "first-failing").text
    assert driver.find_elements(By.CSS_SELECTOR, f'tr.first-failing[data-name="{first}"]')
    target = [r for r in rows if "only-quant" not in r.get_attribute("class")][-1]
    name = target.get_attribute("data-name")
    target.click()
    body = driver.find_element(By.TAG_NAME, "body")
    WebDriverWait(driver, 30).until(lambda d: body.get_attribute("data-selected") == name)
    title = driver.find_element(By.CSS_SELECTOR, "#tensor-plot .gtitle").text
    assert title.startswith(name + ": cos")
    assert driver.find_elements(By.CSS_SELECTOR, "#tensor-plot .scatterlayer .point")
    driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


@pytest.mark.parametrize("manual", [False, True], ids=["auto", "manual_run"])
def test_served_page_in_chromium(digits_int8, tmp_path, manual):
    work, f32, quant, image = digits_int8
    driver = browser()
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "tpuc.tools.visual",
        "--f32_mlir",
        str(f32),
        "--quant_mlir",
        str(quant),
        "--input",
        image,
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--tolerance",
        TIGHT,
    ] + (["--manual_run"] if manual else [])
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "serving on" in server.stdout.readline(), server.stderr.read()
        url = f"http://127.0.0.1:{port}/"
        names = quant_tensor_names(digits_int8)
        check_page(driver, url, names, tmp_path / "served.png", manual)
        data = json.loads(urllib.request.urlopen(url + "data.json", timeout=30).read())
        assert data["first_failing"] is not None
        assert [t["name"] for t in data["tensors"]] == names
    finally:
        driver.quit()
        server.terminate()
        server.wait(10)


def test_static_page_in_chromium(digits_int8, tmp_path, capsys):
    work, f32, quant, image = digits_int8
    report = tmp_path / "report.html"
    argv = ["--f32_mlir", str(f32), "--quant_mlir", str(quant), "--input", image]
    code, out, err = run_main(
        visual.main, argv + ["--static", str(report), "--tolerance", TIGHT], capsys
    )
    assert code == 0, err
    data = visual.compare(str(f32), str(quant), [image], visual_tolerance())
    assert f"first below tolerance: {data['first_failing']}" in out
    driver = browser()
    try:
        check_page(
            driver, report.as_uri(), [t["name"] for t in data["tensors"]], tmp_path / "static.png"
        )
    finally:
        driver.quit()


def quant_tensor_names(digits_int8) -> list[str]:
    """Every non-weight tensor of the quantized module, read from its IR."""
    from tpuc.dialects import top
    from tpuc.dialects.base import TensorOp
    from tpuc.ir.module_io import load_module

    module, _ = load_module(digits_int8[2])
    skip = (top.WeightOp, top.NoneOp)
    ops = [op for op in module.walk() if isinstance(op, TensorOp) and not isinstance(op, skip)]
    return [name for op in ops for name in op.names]


def visual_tolerance():
    from tpuc.base.compare import Tolerance

    return Tolerance.parse(TIGHT)


def test_first_failing_is_model_deploys(digits_int8):
    """The page's first layer below tolerance is the one tpuc.workflow.deploy's search names."""
    work, f32, quant, image = digits_int8
    data = visual.compare(str(f32), str(quant), [image], visual_tolerance())
    failing = [t["name"] for t in data["tensors"] if t["passed"] is False]
    assert failing and data["first_failing"] == failing[0]


def test_busy_port_is_one_line(digits_int8, capsys):
    work, f32, quant, image = digits_int8
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["--f32_mlir", str(f32), "--quant_mlir", str(quant), "--input", image]
        argv += ["--host", "127.0.0.1", "--port", str(port)]
        code, _, err = run_main(visual.main, argv, capsys)
    assert code == 1
    assert f"try --port {port + 1}" in one_line_error(err)


def test_static_page_never_overwrites_an_input(digits_int8, tmp_path, capsys):
    """--static naming an input (here a hard link to --f32_mlir) is refused;
    the page was once written over it in place."""
    import os

    work, f32, quant, image = digits_int8
    before = f32.read_bytes()
    os.link(f32, tmp_path / "page.html")
    argv = ["--f32_mlir", str(f32), "--quant_mlir", str(quant), "--input", image]
    code, _, err = run_main(visual.main, argv + ["--static", str(tmp_path / "page.html")], capsys)
    assert code == 1
    assert f"refusing to overwrite an input file (a hard link to {f32})" in one_line_error(err)
    assert f32.read_bytes() == before


def test_quant_mlir_of_another_model(digits_int8, tmp_path, capsys):
    work, f32, _, image = digits_int8
    conv_model(tmp_path / "c.onnx")
    np.savez(tmp_path / "c_in.npz", x=np.ones((1, 3, 8, 8), np.float32))
    argv = [
        "--model_name",
        "c",
        "--model_def",
        str(tmp_path / "c.onnx"),
        "--mlir",
        str(tmp_path / "c.mlir"),
    ]
    assert model_transform.run(argv) == 0
    argv = ["--mlir", str(tmp_path / "c.mlir"), "--quantize", "F32", "--chip", "bm1684x"]
    assert model_deploy.run(argv + ["--model", str(tmp_path / "c.bmodel")]) == 0
    other = next(tmp_path.glob("c_bm1684x_f32_tpu.mlir"))
    argv = [
        "--f32_mlir",
        str(f32),
        "--quant_mlir",
        str(other),
        "--input",
        image,
        "--static",
        "x.html",
    ]
    code, _, err = run_main(visual.main, argv, capsys)
    assert code == 1
    assert "does not come from --f32_mlir" in one_line_error(err)
