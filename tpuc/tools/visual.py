"""visual.py: where quantization hurts, tensor by tensor, in a browser.

    visual.py --f32_mlir m.mlir --quant_mlir m_bm1684x_int8_sym_tpu.mlir --input x.npz
              [--port 10000] [--host 0.0.0.0] [--manual_run] [--static report.html]

Runs the float (TOP) module in the TOP interpreter and the quantized (TPU)
module in the TPU interpreter on one input, pairs their tensors by name as
model_deploy.py does (tpuc.workflow.deploy.layer_names), and serves a page: the
quantized graph colored by each tensor's cosine similarity to its float
counterpart, a table of every tensor with cosine / euclidean / SQNR, and per
tensor a scatter (float vs quantized) and histograms with the quantization
range drawn. The first layer below --tolerance (model_deploy.py's search)
is highlighted; tensors only in one network are marked. `--static FILE`
writes the same page, self-contained, instead of serving it.
"""

from __future__ import annotations

import errno
import json

from tpuc.base.errors import TpucError, run_cli
from tpuc.tools.cli import existing_file, make_parser

PROG = "visual.py"
SAMPLES = 4000  # values per tensor sent to the page


def build_parser():
    parser = make_parser(
        PROG,
        "Compare a float (TOP) and a quantized (TPU) module tensor by tensor in a web page: "
        "the quantized graph colored by similarity, per-tensor scatter and histograms.",
        "Tensors are paired by name as model_deploy.py pairs them; the first layer below "
        "--tolerance is the one model_deploy.py names. --static writes the page to a file "
        "(self-contained) instead of serving it.",
    )
    parser.add_argument("--f32_mlir", required=True, help="float TOP .mlir (model_transform.py)")
    parser.add_argument(
        "--quant_mlir",
        required=True,
        help="quantized _tpu.mlir (model_deploy.py) of the same model",
    )
    parser.add_argument(
        "--input", required=True, help="input: image, .npy or .npz (comma-separated for several)"
    )
    parser.add_argument("-p", "--port", type=int, default=10000, help="port (default 10000)")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument(
        "--manual_run",
        action="store_true",
        help="do not run the networks until the page's Run button is pressed",
    )
    parser.add_argument("--static", metavar="FILE", help="write a self-contained page to FILE")
    parser.add_argument(
        "--tolerance", default="0.99,0.99", help="minimum cosine,euclid similarity (0.99,0.99)"
    )
    return parser


# --- the comparison ----------------------------------------------------------------


def compare(f32_mlir: str, quant_mlir: str, inputs: list[str], tolerance) -> dict:
    """Everything the page shows, as JSON-ready data."""
    from tpuc.interp.accelerator import accelerated
    from tpuc.interp.top_interpreter import run_top
    from tpuc.interp.tpu_interpreter import TpuInterpreter
    from tpuc.ir.module_io import load_module
    from tpuc.ir.preprocess import input_specs, load_inputs
    from tpuc.workflow.deploy import first_failing_layer, layer_names

    top, top_store = load_module(existing_file(f32_mlir, "--f32_mlir"))
    quant, quant_store = load_module(existing_file(quant_mlir, "--quant_mlir"))
    feed = load_inputs(inputs, input_specs(top))
    top_names = _tensor_names(top)
    pairs = layer_names(quant, top_names)
    quant_names = [n for n in _tensor_names(quant) if n not in feed]
    if not pairs:
        raise TpucError(
            f"--quant_mlir {quant_mlir} does not come from --f32_mlir {f32_mlir}: none of its "
            f"{len(quant_names)} tensor names is in the float module"
        )
    top_values = run_top(top, top_store, feed, dump_all=True, native=accelerated("visual"))
    interpreter = TpuInterpreter(quant)
    quant_values = interpreter.real_values(interpreter.run(quant_store, feed, dump_all=True))
    first = first_failing_layer(pairs, quant_values, top_values, tolerance, set(feed))
    tensors = _graph(quant, dict(pairs), top_values, quant_values, interpreter.elements, tolerance)
    paired = {t["float_name"] for t in tensors if t["float_name"]}
    float_only = sorted(n for n in top_names if n not in paired and n not in feed)
    return {
        "f32_mlir": str(f32_mlir),
        "quant_mlir": str(quant_mlir),
        "tolerance": [tolerance.cosine, tolerance.euclid],
        "tensors": tensors,
        "float_only": float_only,
        "first_failing": first.tpu_name if first else None,
    }


def _tensor_names(module) -> list[str]:
    from tpuc.dialects import top
    from tpuc.dialects.base import TensorOp

    skip = (top.WeightOp, top.NoneOp)
    return [
        n
        for op in module.walk()
        if isinstance(op, TensorOp) and not isinstance(op, skip)
        for n in op.names
    ]


def _graph(module, pairs, top_values, quant_values, elements, tolerance) -> list[dict]:
    """One entry per tensor of the quantized module, in graph order."""
    from tpuc.dialects import top
    from tpuc.dialects.base import TensorOp
    from tpuc.ir.core import main_function

    producer, rows = {}, []
    for op in main_function(module).body.block.ops:
        if not isinstance(op, TensorOp) or isinstance(op, top.WeightOp | top.NoneOp):
            continue
        inputs = [producer[o] for o in op.operands if o in producer]
        for result, name in zip(op.results, op.names, strict=False):
            producer[result] = name
            float_name = pairs.get(name) or (name if name in top_values else None)
            row = {"name": name, "op": op.name, "inputs": inputs, "float_name": float_name}
            row.update(
                _stats(row, top_values, quant_values.get(name), elements.get(name), tolerance)
            )
            rows.append(row)
    return rows


def _stats(row, top_values, quant, element, tolerance) -> dict:
    import numpy as np

    from tpuc.base.compare import compare_tensors
    from tpuc.dialects.quant import UniformQuantizedType

    out = {"range": None, "cosine": None, "euclid": None, "sqnr": None, "passed": None}
    if isinstance(element, UniformQuantizedType):
        zp, scale = element.zero_point_attr.data, element.scale
        out["range"] = [scale * (element.storage_min - zp), scale * (element.storage_max - zp)]
    ref = top_values.get(row["float_name"]) if row["float_name"] else None
    if quant is None or ref is None or np.size(quant) != np.size(ref):
        return out
    result = compare_tensors(row["name"], quant, ref, tolerance)
    s = result.similarity
    out.update(cosine=_num(s.cosine), euclid=_num(s.euclid), sqnr=_num(s.sqnr))
    out["passed"] = bool(result.passed)
    pick = np.random.default_rng(0).permutation(np.size(quant))[:SAMPLES]
    out["float_values"] = np.asarray(ref, np.float64).reshape(-1)[pick].round(6).tolist()
    out["quant_values"] = np.asarray(quant, np.float64).reshape(-1)[pick].round(6).tolist()
    out["shape"] = list(np.shape(quant))
    return out


def _num(value: float) -> float | None:
    import math

    return value if math.isfinite(value) else None


# --- serving ----------------------------------------------------------------------------


def serve(args, tolerance) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tpuc.tools.visual_page import page, plotly_js

    inputs = [p for p in args.input.split(",") if p]
    cache: dict = {}

    def data() -> bytes:
        if "json" not in cache:
            cache["json"] = json.dumps(
                compare(args.f32_mlir, args.quant_mlir, inputs, tolerance)
            ).encode()
        return cache["json"]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's spelling)
            routes = {
                "/": (lambda: page(None, manual=args.manual_run).encode(), "text/html"),
                "/plotly.min.js": (lambda: plotly_js().encode(), "application/javascript"),
                "/data.json": (data, "application/json"),
            }
            route = routes.get(self.path.split("?")[0])
            if route is None:
                self.send_error(404)
                return
            try:
                body = route[0]()
            except TpucError as exc:
                self.send_error(500, str(exc))
                return
            self.send_response(200)
            self.send_header("Content-Type", route[1])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    if not args.manual_run:
        data()  # errors in the inputs show before the server starts
    try:
        server = ThreadingHTTPServer((args.host, args.port), Handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise TpucError(
                f"port {args.port} on {args.host} is busy; try --port {args.port + 1}"
            ) from None
        raise TpucError(f"cannot listen on {args.host}:{args.port} ({exc.strerror})") from None
    print(
        f"[visual.py] serving on http://{args.host}:{server.server_address[1]}/ (Ctrl-C stops)",
        flush=True,
    )
    with server:
        server.serve_forever()


def run(argv: list[str] | None = None) -> int:
    from tpuc.base.compare import Tolerance

    args = build_parser().parse_args(argv)
    tolerance = Tolerance.parse(args.tolerance)
    if args.static is None:
        serve(args, tolerance)
        return 0
    from tpuc.tools.visual_page import page

    inputs = [p for p in args.input.split(",") if p]
    data = compare(args.f32_mlir, args.quant_mlir, inputs, tolerance)
    from tpuc.base.files import OutputSet

    try:
        with OutputSet(protected=(args.f32_mlir, args.quant_mlir, *inputs)) as out:
            out.write_text(args.static, page(data, manual=False))
    except OSError as exc:
        raise TpucError(f"--static {args.static}: cannot write it ({exc.strerror})") from None
    first = data["first_failing"] or "none"
    count = len(data["tensors"])
    print(f"[visual.py] wrote {args.static} ({count} tensors; first below tolerance: {first})")
    return 0


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
