"""`kazeia voice`: the voice library (engine/voices/voice_library.py): profiles made from a recording or kept
from a take (engine/voices/keep_voice.py), listed, searched, described, renamed, deleted, exported, imported."""
from __future__ import annotations

import json
import sys

from .options import THREADS_HELP, thread_count


def add_parser(sub) -> None:
    v = sub.add_parser("voice", help="voice profiles for Base models: the voice library")
    vsub = v.add_subparsers(dest="voice_command", required=True)
    vc = vsub.add_parser("create", help="make a voice profile from reference audio, or keep the voice of a take",
                         description="From --audio (a recording) or --from-take (an audio file Kazeia wrote, with "
                                     "the text it says, or a workbench take's id or name): the voice goes into the "
                                     "library as --name, or into the file -o.")
    src = vc.add_mutually_exclusive_group(required=True)
    src.add_argument("--audio", help="reference audio: any format, rate and channel count")
    src.add_argument("--from-take", metavar="TAKE", help="keep a take's voice (VoiceDesign, CustomVoice, any take): "
                                                         "its audio file, or a workbench take's id or name")
    vc.add_argument("--model", action="append", default=None,
                    help="a Base model (GGUF or registered name); repeat for both sizes. Default with --from-take: "
                         "every registered Base model, one per size")
    vc.add_argument("--text", default=None, help="the transcript: in-context cloning (a take's own text by default)")
    vc.add_argument("--name", default=None, help="the name in the voice library (default: the audio file's name)")
    vc.add_argument("-o", "--output", default=None, help="write this profile file (.kzvoice) instead of the library")
    vc.add_argument("--notes", default="", help="notes kept with the voice")
    vc.add_argument("--tag", action="append", default=[], help="a tag (repeat)")
    vc.add_argument("--language", default="", help="the voice's language (for the library's search)")
    vc.add_argument("--threads", type=thread_count, default=None, help=THREADS_HELP)
    vc.set_defaults(func=create)

    ls = vsub.add_parser("list", help="the voices of the library (searched by words: name, tags, notes, language...)")
    ls.add_argument("query", nargs="*", help="words every listed voice has")
    ls.add_argument("--json", action="store_true", help="as JSON")
    ls.set_defaults(func=list_voices)
    ed = vsub.add_parser("edit", help="a voice's notes, tags or language")
    ed.add_argument("name")
    ed.add_argument("--notes", default=None)
    ed.add_argument("--language", default=None)
    ed.add_argument("--tag", action="append", default=None, help="add a tag (repeat)")
    ed.add_argument("--untag", action="append", default=None, help="remove a tag (repeat)")
    ed.set_defaults(func=edit)
    rn = vsub.add_parser("rename", help="rename a voice")
    rn.add_argument("name")
    rn.add_argument("new")
    rn.set_defaults(func=rename)
    rm = vsub.add_parser("delete", help="delete a voice (and its cached previews)")
    rm.add_argument("name")
    rm.set_defaults(func=delete)
    ex = vsub.add_parser("export", help="one file with the voice, its notes and tags and its cached preview")
    ex.add_argument("name")
    ex.add_argument("output", help=".kzvoice file or folder")
    ex.set_defaults(func=export)
    im = vsub.add_parser("import", help="a .kzvoice file into the library")
    im.add_argument("file")
    im.add_argument("--name", default=None)
    im.set_defaults(func=import_voice)


def _base_models(args) -> list:
    from ..model_files.demo import resolve_model
    from ..model_files.model_file import open_model
    if args.model:
        return [open_model(resolve_model(m)) for m in args.model]
    from ..models.registry import Registry
    return [open_model(e.path) for e in Registry().entries() if e.variant == "base"]


def create(args) -> int:
    from ..voices.voice_library import VoiceLibrary
    library = VoiceLibrary()
    about = {"notes": args.notes, "tags": sorted(set(args.tag)), "language": args.language}
    if args.from_take:
        from ..voices.keep_voice import keep_voice, read_take
        reference = read_take(args.from_take)
        models = _base_models(args)
        if args.output:
            if len(models) != 1:
                raise ValueError("-o writes one profile: give one --model (a profile is for one Base model size)")
            from ..voices.voice import save_voice, voice_from_audio
            voice = voice_from_audio(models[0], reference.audio, args.text or reference.text or None, args.threads)
            save_voice(voice, args.output, models[0], {**about, "source": reference.source, "origin": reference.origin})
            print(f"wrote {args.output}: the voice of {args.from_take} for {models[0].info.path.name}")
            return 0
        names = keep_voice(reference, models, library, args.name or f"kept {args.from_take}", args.threads, args.text,
                           about)
        said = f"with its text ({len(reference.text)} characters)" if (args.text or reference.text) else \
            "without a transcript (x-vector only: give --text for in-context cloning)"
        print(f"kept the voice of {args.from_take} ({reference.source}, {len(reference.audio) / 24000:.1f} s, {said}) "
              f"as: {', '.join(names)}")
        return 0
    if not args.model or len(args.model) != 1:
        raise ValueError("--audio needs one --model (a Base model)")
    from ..model_files.demo import resolve_model
    from ..model_files.model_file import open_model
    from ..voices.voice import create_voice, save_voice
    model = open_model(resolve_model(args.model[0]))
    voice = create_voice(model, args.audio, text=args.text, threads=args.threads)
    kind = (f"in-context voice ({len(voice.ref_codes)} reference frames + transcript)" if voice.ref_codes is not None
            else f"x-vector voice ({len(voice.x_vector)} values)")
    if args.output:
        save_voice(voice, args.output, model, {**about, "source": "recording"})
        print(f"wrote {args.output}: {kind} for {model.info.path.name}")
        return 0
    from pathlib import Path
    name = library.add(voice, model, args.name or Path(args.audio).stem, {**about, "source": "recording"})
    print(f"added {name!r} to the voice library: {kind} for {model.info.path.name}")
    return 0


def list_voices(args) -> int:
    from dataclasses import asdict

    from ..voices.voice_library import VoiceLibrary
    library = VoiceLibrary()
    found = library.search(" ".join(args.query))
    if args.json:
        print(json.dumps([asdict(e) for e in found], indent=1, ensure_ascii=False))
        return 0
    if not found:
        print(f"no voices{' match ' + repr(' '.join(args.query)) if args.query else ''} in {library.folder}",
              file=sys.stderr)
        return 0 if not args.query else 1
    for e in found:
        if e.kind == "unreadable":
            print(_plain(f"{e.name:24s} unreadable: {e.problem}"))
            continue
        tags = f"  [{', '.join(e.tags)}]" if e.tags else ""
        print(_plain(f"{e.name:24s} {e.size:5s} {e.kind:10s} {e.source:12s} {e.language or '-':8s}{tags}"
                     + (f"  {e.notes}" if e.notes else "")))
    return 0


def _plain(line: str) -> str:
    """One line as a terminal shows it: what a shared profile says (a name, notes, tags) never moves
    the cursor nor sends the terminal a control sequence."""
    return "".join(c if c.isprintable() else " " if c in "\t\n\r" else "?" for c in line)


def edit(args) -> int:
    from ..voices.voice_library import VoiceLibrary
    library = VoiceLibrary()
    name = library.find(args.name).stem
    changes = {}
    if args.notes is not None:
        changes["notes"] = args.notes
    if args.language is not None:
        changes["language"] = args.language
    if args.tag or args.untag:
        tags = set(library.entry(name).tags) | set(args.tag or [])
        changes["tags"] = sorted(tags - set(args.untag or []))
    if not changes:
        raise ValueError("nothing to change: give --notes, --language, --tag or --untag")
    e = library.update(name, **changes)
    print(_plain(f"{e.name}: language {e.language or '-'}, tags [{', '.join(e.tags)}], notes {e.notes!r}"))
    return 0


def rename(args) -> int:
    from ..voices.voice_library import VoiceLibrary
    print(f"renamed to {VoiceLibrary().rename(args.name, args.new)!r}")
    return 0


def delete(args) -> int:
    from ..voices.voice_library import VoiceLibrary
    library = VoiceLibrary()
    name = library.find(args.name).stem
    library.delete(name)
    print(f"deleted {name!r}")
    return 0


def export(args) -> int:
    from ..voices.voice_library import VoiceLibrary
    print(f"wrote {VoiceLibrary().export(args.name, args.output)}")
    return 0


def import_voice(args) -> int:
    from ..voices.voice_library import VoiceLibrary
    print(f"imported as {VoiceLibrary().import_file(args.file, args.name)!r}")
    return 0
