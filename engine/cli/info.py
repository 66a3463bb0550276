"""`kazeia info`: describe a model file."""
from __future__ import annotations

import json



def add_parser(sub) -> None:
    i = sub.add_parser("info", help="describe a model file")
    i.add_argument("model", help='a GGUF file, a registered name (kazeia models), or "demo" for the bundled demo model')
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=run)


def run(args) -> int:
    from ..model_files.demo import resolve_model
    from ..model_files.model_file import open_model
    info = open_model(resolve_model(args.model)).info
    if args.json:
        d = {k: v for k, v in info.__dict__.items()}
        d["path"] = str(info.path)
        d["speakers"] = [s.__dict__ for s in info.speakers]
        print(json.dumps(d, indent=2, default=str))
    else:
        print(info.summary())
    return 0
