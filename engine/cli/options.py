"""What the commands share: thread and batch arguments, help that names defaults once, text files read
and output paths checked before minutes of work."""

from __future__ import annotations

import argparse


OVERLAP_HELP = ("decode beside generation on part of the cores (the same audio; default: $KAZEIA_OVERLAP, "
                "else off; docs/performance.md)")
# the fields of the text's plan that `say` and `book` set from their options, by option
PAUSE_OPTIONS = {"sentence_ms": "--pause-sentence", "paragraph_ms": "--pause-paragraph", "max_chars": "--max-chars",
                 "max_tokens": "--max-tokens", "chapter_pause_ms": "--pause-title", "max_frames": "--max-frames",
                 "seed": "--seed", "batch": "--batch"}
THREADS_HELP = "compute threads (default: every core; fewer while other processes hold some)"


def read_text_file(path: str, option: str = "--text-file") -> str:
    """A UTF-8 text file named on the command line, its size checked before it is read (/dev/zero,
    a FIFO or a file over text/limits.py's MAX_TEXT_FILE_BYTES is refused at once)."""
    from ..text.limits import MAX_TEXT_FILE_BYTES
    from ..untrusted import read_text
    try:
        return read_text(path, MAX_TEXT_FILE_BYTES, f"{option} {path}")
    except OSError as e:
        raise ValueError(f"{option} {path}: cannot read it ({e.strerror})") from None


def as_options(check, names: dict[str, str]) -> None:
    """`check()` (a validate), its ValueError saying the option where it names a field ("sentence_ms
    must be ..." said as "--pause-sentence must be ...")."""
    try:
        check()
    except ValueError as e:
        field, _, why = str(e).partition(" ")
        if field in names:
            raise ValueError(f"{names[field]} {why}") from None
        raise


def check_sampling(seed: int, **given) -> None:
    """The command line's sampling numbers (those given; None: the model's own) checked before the
    model loads: a NaN temperature or a top-k past any vocabulary fails at once, naming the option."""
    from ..synthesis.requests import SamplingParams
    try:
        SamplingParams(seed=seed, **{k: v for k, v in given.items() if v is not None}).validate()
    except ValueError as e:   # ("top_k must be ..." said as the option: "--top-k must be ...")
        field, _, why = str(e).partition(" ")
        raise ValueError(f"--{field.replace('_', '-')} {why}") from None


def check_output_path(path: str) -> None:
    import os
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"{path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"{path}: cannot write into {folder}")
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder: give a file name (.wav or .flac)")

def thread_count(text: str) -> int:
    from ..synthesis.threads import check_threads
    try:
        return check_threads(int(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e) if text.strip().lstrip("-").isdigit() else
                                         f"threads must be a whole number, got {text!r}") from None

def batch_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(b < 1 for b in sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: give positive batch sizes separated by commas, e.g. 1,2,4,8")
    return sizes

class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that ends with an option's default where its text does not say it already, and only
    for a value (not for a flag's True or False, nor for None: "the model's own" says more)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or not action.option_strings or any(action.default is v for v in (None, True, False,
                                                                                                argparse.SUPPRESS)):
            return text
        return f"{text} (default: %(default)s)"


def options_from(cls, args):
    """A command's typed settings (a dataclass whose fields are named as its options' dests) from
    argparse's namespace: made once where the command line ends, then only read."""
    from dataclasses import fields
    return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})


def add_ray_arguments(parser, what: str) -> None:
    """--ray and --node-model (`kazeia render`, `kazeia book`)."""
    parser.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                        help=f"{what} on a Ray cluster: no address starts a local one; ADDRESS joins one "
                             "(pip install 'kazeia[cluster]')")
    parser.add_argument("--node-model", default=None,
                        help="with --ray: the model's path on every node, when it differs from --model's")
