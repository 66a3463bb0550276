"""`kazeia voice`: voice profiles for Base models."""
from __future__ import annotations


from .options import (THREADS_HELP, thread_count)


def add_parser(sub) -> None:
    v = sub.add_parser("voice", help="voice profiles for Base models")
    vsub = v.add_subparsers(dest="voice_command", required=True)
    vc = vsub.add_parser("create", help="make a voice profile from reference audio")
    vc.add_argument("--model", required=True, help="a Base model (GGUF)")
    vc.add_argument("--audio", required=True, help="reference audio: any format, rate and channel count")
    vc.add_argument("--text", default=None, help="its transcript: in-context cloning (else x-vector only)")
    vc.add_argument("-o", "--output", required=True, help="voice profile to write (.kzvoice)")
    vc.add_argument("--threads", type=thread_count, default=None, help=THREADS_HELP)
    vc.set_defaults(func=run)


def run(args) -> int:
    from ..demo import resolve_model
    from ..model_file import open_model
    from ..voice import create_voice, save_voice
    model = open_model(resolve_model(args.model))
    voice = create_voice(model, args.audio, text=args.text, threads=args.threads)
    save_voice(voice, args.output, model)
    kind = (f"in-context voice ({len(voice.ref_codes)} reference frames + transcript)" if voice.ref_codes is not None
            else f"x-vector voice ({len(voice.x_vector)} values)")
    print(f"wrote {args.output}: {kind} for {model.info.path.name}")
    return 0
