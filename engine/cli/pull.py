"""`kazeia pull`: download, verify, convert and register a released checkpoint."""
from __future__ import annotations




def add_parser(sub) -> None:
    from ..model_files.gguf_file import HALF_OR_F32, type_mix_arg
    pl = sub.add_parser("pull", help="download a released checkpoint, verify it, convert it and register it by name",
                        description="Downloads with huggingface_hub into its cache (HF_ENDPOINT, HF_TOKEN, HF_HOME, "
                                    "HF_HUB_OFFLINE apply), checks every file against the hub's hashes, converts to one "
                                    "GGUF file and registers it (kazeia models); docs/models.md#pulling-models")
    pl.add_argument("source", help="an alias (kazeia models available: 0.6b-customvoice, 1.7b-voicedesign, ...) "
                                   "or a repository id, e.g. Qwen/Qwen3-TTS-12Hz-0.6B-Base")
    pl.add_argument("--revision", default=None, help="branch, tag or commit (default main)")
    pl.add_argument("--type", type=type_mix_arg, default=None, metavar="TYPE",
                    help="as for convert (default: 0.6B talker=q6_k,code_predictor=q5_k; 1.7B "
                         "talker=q5_k,code_predictor=q6_k; other sizes q8_0)")
    pl.add_argument("--decoder-type", choices=HALF_OR_F32, default=None, help="default f16 (f32 with --type f32)")
    pl.add_argument("-o", "--output", default=None, help="GGUF file to write (default: NAME.gguf in the models folder)")
    pl.add_argument("--name", default=None, help="name to register (default: the alias, plus the type when not the default)")
    pl.add_argument("--force", action="store_true", help="convert again even when the model is up to date")
    pl.add_argument("--json", action="store_true",
                    help="progress as JSON lines on stdout (phase download/verify/convert, done, total, unit, file)")
    pl.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    pl.set_defaults(func=run)


def run(args) -> int:
    from ..models.commands import run_pull
    return run_pull(args)
