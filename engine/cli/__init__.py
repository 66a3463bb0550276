"""The `kazeia` command line: one module per command, each with its parser (`add_parser`) and its
handler (`run`); options.py holds what they share."""
from __future__ import annotations

import argparse
import os
import sys

from . import abx, bench, book, convert, decode, devices, info, make_random_model, models, pull, render, say, serve, voice

# (in the order `kazeia --help` lists them)
COMMANDS = (convert, pull, models, make_random_model, render, book, info, decode, say, voice, abx, bench, serve, devices)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kazeia", description="Kazeia: local Qwen3-TTS speech synthesis on ggml")
    sub = p.add_subparsers(dest="command")
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from ..model_files.errors import ConversionError, ModelLoadError
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:   # plain `kazeia`: what it can do, not an error
        parser.print_help()
        return 0
    try:
        from ..platform_info import check_cpu_level
        check_cpu_level()   # a bad KAZEIA_CPU is a message before anything runs
        return args.func(args)
    except BrokenPipeError:   # the reader left (`kazeia devices | head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # so the exit flush stays quiet
        return 141
    except (ConversionError, ModelLoadError, OSError, ValueError) as e:   # (OSError: a folder not writable, a full disk)
        print(f"kazeia {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"kazeia {args.command}: interrupted", file=sys.stderr)
        return 130
