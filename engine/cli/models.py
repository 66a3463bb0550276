"""`kazeia models`: the models pulled so far."""
from __future__ import annotations

import argparse



def add_parser(sub) -> None:
    ms = sub.add_parser("models", help="the models pulled so far: list, info NAME, rm NAME, available")
    ms.add_argument("--json", action="store_true")
    msub = ms.add_subparsers(dest="models_command")
    ml = msub.add_parser("list", help="registered models (the default)")
    ml.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    ma = msub.add_parser("available", help="the released checkpoints kazeia pull knows by alias")
    ma.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    mi = msub.add_parser("info", help="one registered model: its record and its file's summary")
    mi.add_argument("name")
    mi.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    mr = msub.add_parser("rm", help="forget a model and delete its file")
    mr.add_argument("name")
    mr.add_argument("--keep-file", action="store_true", help="forget it but keep the file")
    ms.set_defaults(func=run)


def run(args) -> int:
    from ..models.commands import run_models
    return run_models(args)
