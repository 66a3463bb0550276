"""`kazeia pull` and `kazeia models` on a terminal: progress bars (speed, ETA) or JSON lines, tables."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .catalog import KNOWN_MODELS, default_type
from .registry import ModelEntry, Registry


def _mb(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


class _Bars:
    """One tqdm bar per phase on stderr (a terminal only)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()
        self.bar, self.phase = None, None

    def __call__(self, p) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm
        if p.phase != self.phase:
            self.close()
            self.phase = p.phase
            self.bar = tqdm(total=p.total, unit=p.unit, unit_scale=True, unit_divisor=1024 if p.unit == "B" else 1000,
                            desc=p.phase, file=sys.stderr, dynamic_ncols=True)
        self.bar.total = p.total
        if p.file:
            self.bar.set_postfix_str(p.file, refresh=False)
        self.bar.update(p.done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def run_pull(args) -> int:
    from ..model_files.errors import PullError
    from .pull import pull_model

    def emit(obj: dict) -> None:
        print(json.dumps(obj), flush=True)

    bars = _Bars(enabled=not args.json and not args.quiet)
    on_progress = (lambda p: emit(p.as_dict())) if args.json else bars
    on_note = ((lambda text: emit({"phase": "note", "message": text})) if args.json
               else (lambda text: print(text, file=sys.stderr)))
    try:
        result = pull_model(args.source, revision=args.revision, out_type=args.type, decoder_type=args.decoder_type,
                            output=args.output, name=args.name, force=args.force, on_progress=on_progress,
                            on_note=on_note)
    except PullError as e:
        if args.json:
            emit({"phase": "error", "message": str(e)})
        raise
    finally:
        bars.close()
    entry = result.entry
    if args.json:
        emit({"phase": "done", "snapshot": str(result.snapshot), "commit": result.commit,
              "downloaded_bytes": result.downloaded_bytes, "up_to_date": result.up_to_date,
              "model": entry.__dict__ if entry else None})
    elif entry is not None and not result.up_to_date:
        print(f"pulled {entry.name}: {entry.source} at {entry.revision[:12]} -> {entry.path} "
              f"({_mb(entry.file_bytes)}, {entry.type}, decoder {entry.decoder_type}); "
              f"use it as --model {entry.name}")
    elif entry is None:
        print(f"downloaded {args.source} into {result.snapshot} (verified; not a model to speak with)")
    return 0


def run_models(args) -> int:
    action = args.models_command or "list"
    registry = Registry()
    if action == "list":
        entries = registry.entries()
        if args.json:
            print(json.dumps([e.__dict__ for e in entries], indent=2))
            return 0
        if not entries:
            print(f"no models yet (registry: {registry.path}); `kazeia models available` lists what "
                  "`kazeia pull` can fetch")
            return 0
        rows = [(e.name, e.variant, e.size, _mb(e.file_bytes), e.type, e.path, f"{e.source}@{e.revision[:12]}")
                for e in entries]
        _table(("NAME", "VARIANT", "SIZE", "FILE", "TYPE", "PATH", "SOURCE"), rows)
        return 0
    if action == "available":
        if args.json:
            print(json.dumps([dict(alias=m.alias, repo=m.repo, size=m.size, variant=m.variant, abilities=m.abilities,
                                   download_mb=m.download_mb, converted_mb=m.converted_mb,
                                   default_type=None if m.codec else default_type(m.size)) for m in KNOWN_MODELS],
                             indent=2))
            return 0
        rows = [(m.alias, m.repo, f"~{m.download_mb / 1000:.1f} GB",
                 f"~{m.converted_mb / 1000:.1f} GB" if m.converted_mb else "-", m.abilities) for m in KNOWN_MODELS]
        _table(("ALIAS", "REPOSITORY", "DOWNLOAD", "CONVERTED", "WHAT IT DOES"), rows)
        print("converted sizes at the default type: 0.6B talker=q6_k,code_predictor=q5_k, "
              "1.7B talker=q5_k,code_predictor=q6_k, f16 decoder")
        return 0
    entry = registry.get(args.name)
    if entry is None:
        raise ValueError(f"no model named {args.name!r} (kazeia models lists them)")
    if action == "info":
        return _info(entry, args.json)
    if action == "rm":
        registry.remove(entry.name)
        path = Path(entry.path)
        if args.keep_file or not path.exists():
            print(f"removed {entry.name} from the registry" + (f"; kept {path}" if path.exists() else ""))
        else:
            path.unlink()
            print(f"removed {entry.name} and deleted {path} ({_mb(entry.file_bytes)}); its download stays in the "
                  "Hugging Face cache (`hf cache` manages it)")
        return 0
    raise ValueError(f"unknown models command {action!r}")


def _info(entry: ModelEntry, as_json: bool) -> int:
    from ..model_files.model_file import open_model
    path = Path(entry.path)
    summary = open_model(path).info.summary() if path.is_file() else f"(file missing: {path})"
    if as_json:
        print(json.dumps({**entry.__dict__, "file_present": path.is_file()}, indent=2))
        return 0
    for key, value in entry.__dict__.items():
        print(f"{key:<13} {_mb(value) if key == 'file_bytes' else value}")
    print()
    print(summary)
    return 0


def _table(header: tuple[str, ...], rows: list[tuple]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for row in (header, *rows):
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip())
