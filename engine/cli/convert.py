"""`kazeia convert`: a released checkpoint folder into one GGUF file."""
from __future__ import annotations




def add_parser(sub) -> None:
    from ..model_files.gguf_file import FILE_TYPES, HALF_OR_F32, type_mix_arg
    c = sub.add_parser("convert", help="convert a released Qwen3-TTS checkpoint folder into one GGUF file")
    c.add_argument("hf_dir", help="checkpoint folder (config.json, model.safetensors, speech_tokenizer/, ...)")
    c.add_argument("-o", "--output", required=True, help="GGUF file to write")
    c.add_argument("--type", type=type_mix_arg, default="f16", metavar="TYPE",
                   help=f"storage of large talker/code-predictor matrices: one of {', '.join(FILE_TYPES)}, or per "
                        "stage, e.g. talker=q5_k,code_predictor=q6_k (norms, codebooks stay f32; decoder and "
                        "encoders f16 unless f32; default f16)")
    c.add_argument("--decoder-type", choices=HALF_OR_F32, default=None,
                   help="speech decoder and encoder weights (default: f32 for --type f32, else f16)")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=run)


def run(args) -> int:
    from ..model_files.convert import convert
    report = convert(args.hf_dir, args.output, out_type=args.type, progress=not args.quiet,
                     decoder_type=args.decoder_type)
    types = ", ".join(f"{n} {t}" for t, n in sorted(report.types.items()))
    print(f"wrote {report.path}: {report.n_tensors} tensors ({types}), {report.n_params / 1e6:.1f} M parameters, "
          f"{report.consumed} source tensors consumed, {report.ignored} ignored, {report.seconds:.1f} s")
    return 0
