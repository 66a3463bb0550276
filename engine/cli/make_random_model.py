"""`kazeia make-random-model`: a model of deterministic random weights."""
from __future__ import annotations




def add_parser(sub) -> None:
    from ..model_files.gguf_file import HALF_OR_F32, type_mix_arg
    from ..model_files.random_model import SIZES, VARIANTS
    r = sub.add_parser("make-random-model", help="write a model with deterministic random weights (no torch)")
    r.add_argument("-o", "--output", required=True)
    r.add_argument("--size", choices=SIZES, default="tiny")
    r.add_argument("--variant", choices=VARIANTS, default="custom_voice")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--type", type=type_mix_arg, default=None, metavar="TYPE",
                   help="as for convert, e.g. q6_k or talker=q5_k,code_predictor=q6_k (default q8_0; tiny: 5 MB)")
    r.add_argument("--decoder-type", choices=HALF_OR_F32, default=None)
    r.add_argument("-q", "--quiet", action="store_true")
    r.set_defaults(func=run)


def run(args) -> int:
    from ..model_files.model_file import open_model
    from ..model_files.random_model import make_random_model
    path = make_random_model(args.output, size=args.size, variant=args.variant, seed=args.seed,
                             out_type=args.type, progress=not args.quiet, decoder_type=args.decoder_type)
    print(open_model(path).info.summary())
    return 0
