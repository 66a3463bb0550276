"""The `kazeia` command line."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path



def _cmd_convert(args) -> int:
    from .convert import convert
    report = convert(args.hf_dir, args.output, out_type=args.type, progress=not args.quiet)
    types = ", ".join(f"{n} {t}" for t, n in sorted(report.types.items()))
    print(f"wrote {report.path}: {report.n_tensors} tensors ({types}), {report.n_params / 1e6:.1f} M parameters, "
          f"{report.consumed} source tensors consumed, {report.ignored} ignored, {report.seconds:.1f} s")
    return 0


def _cmd_random(args) -> int:
    from .model_file import open_model
    from .random_model import make_random_model
    path = make_random_model(args.output, size=args.size, variant=args.variant, seed=args.seed,
                             out_type=args.type, progress=not args.quiet)
    print(open_model(path).info.summary())
    return 0


def _cmd_info(args) -> int:
    from .demo import resolve_model
    from .model_file import open_model
    info = open_model(resolve_model(args.model)).info
    if args.json:
        d = {k: v for k, v in info.__dict__.items()}
        d["path"] = str(info.path)
        d["speakers"] = [s.__dict__ for s in info.speakers]
        print(json.dumps(d, indent=2, default=str))
    else:
        print(info.summary())
    return 0


def _cmd_devices(args) -> int:
    from kazeia import _native
    devices = _native.devices()
    if args.json:
        print(json.dumps(devices, indent=2))
        return 0
    for d in devices:
        caps = [c for c in ("async", "host_buffer", "buffer_from_host_ptr", "events") if d[c]]
        print(f"{d['name']:<10} {d['type']:<6} {d['description']}  "
              f"memory {d['memory_free'] / 2**30:.1f}/{d['memory_total'] / 2**30:.1f} GiB  caps: {', '.join(caps) or '-'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .gguf_file import FILE_TYPES
    from .random_model import SIZES, VARIANTS
    p = argparse.ArgumentParser(prog="kazeia", description="Kazeia: local Qwen3-TTS speech synthesis on ggml")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("convert", help="convert a released Qwen3-TTS checkpoint folder into one GGUF file")
    c.add_argument("hf_dir", help="checkpoint folder (config.json, model.safetensors, speech_tokenizer/, ...)")
    c.add_argument("-o", "--output", required=True, help="GGUF file to write")
    c.add_argument("--type", choices=FILE_TYPES, default="f16",
                   help="storage of large talker/code-predictor matrices (norms, codebooks stay f32; "
                        "decoder and encoders f16 unless f32)")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=_cmd_convert)

    r = sub.add_parser("make-random-model", help="write a model with deterministic random weights (no torch)")
    r.add_argument("-o", "--output", required=True)
    r.add_argument("--size", choices=SIZES, default="tiny")
    r.add_argument("--variant", choices=VARIANTS, default="custom_voice")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--type", choices=FILE_TYPES, default=None, help="default q8_0 (tiny: 5 MB)")
    r.add_argument("-q", "--quiet", action="store_true")
    r.set_defaults(func=_cmd_random)

    i = sub.add_parser("info", help="describe a model file")
    i.add_argument("model", help='a GGUF file, or "demo" for the bundled demo model')
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=_cmd_info)

    d = sub.add_parser("devices", help="list ggml devices")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=_cmd_devices)
    return p


def main(argv: list[str] | None = None) -> int:
    from .errors import ConversionError, ModelLoadError
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConversionError, ModelLoadError, FileNotFoundError, ValueError) as e:
        print(f"kazeia {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"kazeia {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
