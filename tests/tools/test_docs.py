"""docs/tools.md says what --help says: every flag, help text, description."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tpuc.tools import (
    model_deploy,
    model_eval,
    model_runner,
    model_tool,
    model_transform,
    npz_tool,
    run_calibration,
    visual,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "tools.md"


def normalized(text: str) -> str:
    return " ".join(text.replace("`", "").replace("\\|", "|").split())  # \| in tables


def parsers():
    yield "model_transform.py", model_transform.build_parser()
    yield "model_runner.py", model_runner.build_parser()
    yield "run_calibration.py", run_calibration.build_parser()
    yield "model_deploy.py", model_deploy.build_parser()
    yield "model_eval.py", model_eval.build_parser()
    yield "visual.py", visual.build_parser()
    yield "model_tool.py", model_tool.build_parser()
    top = npz_tool.build_parser()
    yield "npz_tool.py", top
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from ((f"npz_tool.py {n}", p) for n, p in action.choices.items())


@pytest.mark.parametrize("label, parser", list(parsers()), ids=lambda x: str(x)[:30])
def test_docs_match_help(label, parser):
    docs = normalized(DOCS.read_text())
    texts = [parser.description, parser.epilog]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        texts.append(action.help)
        for option in action.option_strings:
            assert option in docs, f"{label}: {option} is not documented"
    for text in filter(None, texts):
        assert normalized(text) in docs, f"{label}: not in docs/tools.md: {text}"
