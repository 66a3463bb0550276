"""The `kazeia` command line."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

OVERLAP_HELP = ("decode beside generation on part of the cores (the same audio; default: $KAZEIA_OVERLAP, "
                "else off; docs/performance.md)")


def _cmd_convert(args) -> int:
    from .convert import convert
    report = convert(args.hf_dir, args.output, out_type=args.type, progress=not args.quiet,
                     decoder_type=args.decoder_type)
    types = ", ".join(f"{n} {t}" for t, n in sorted(report.types.items()))
    print(f"wrote {report.path}: {report.n_tensors} tensors ({types}), {report.n_params / 1e6:.1f} M parameters, "
          f"{report.consumed} source tensors consumed, {report.ignored} ignored, {report.seconds:.1f} s")
    return 0


def _cmd_pull(args) -> int:
    from .models.commands import run_pull
    return run_pull(args)


def _cmd_models(args) -> int:
    from .models.commands import run_models
    return run_models(args)


def _cmd_random(args) -> int:
    from .model_file import open_model
    from .random_model import make_random_model
    path = make_random_model(args.output, size=args.size, variant=args.variant, seed=args.seed,
                             out_type=args.type, progress=not args.quiet, decoder_type=args.decoder_type)
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


def _cmd_decode(args) -> int:
    import time

    import numpy as np

    from .audio_io import write_audio
    from .demo import resolve_model
    from .model_file import open_model
    from .speech_decoder import SpeechDecoder
    model = open_model(resolve_model(args.model))
    try:
        codes = np.load(args.codes, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"{args.codes}: cannot read codes ({e})") from None
    decoder = SpeechDecoder(model, threads=args.threads, reference_chunking=not args.one_pass)
    start = time.perf_counter()
    if args.stream:
        stream = decoder.session()
        pieces, first = [], None
        for i in range(len(codes)):
            pieces.append(stream.push(codes[i:i + 1]))
            first = first or time.perf_counter() - start
        audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    else:
        audio = decoder.decode(codes)
    seconds = time.perf_counter() - start
    write_audio(args.output, audio, model.info.sample_rate)
    frames = len(codes)
    line = (f"wrote {args.output}: {frames} frames, {len(audio) / model.info.sample_rate:.2f} s of audio; "
            f"decoder {1000 * seconds / max(frames, 1):.1f} ms per frame, RTF {seconds / max(frames / model.info.frame_rate, 1e-9):.2f}")
    if args.stream and first is not None:
        line += f", first audio after {1000 * first:.1f} ms"
    print(line)
    return 0


def read_text_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise ValueError(f"--text-file {path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"--text-file {path}: a folder, not a text file") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"--text-file {path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise ValueError(f"--text-file {path}: cannot read it ({e.strerror})") from None


def check_output_path(path: str) -> None:
    import os
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"{path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"{path}: cannot write into {folder}")
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder: give a file name (.wav or .flac)")


def _cmd_render(args) -> int:
    from tqdm import tqdm

    from .demo import resolve_model
    from .render import LocalExecutor, RenderOptions, plan_render, render
    from .synthesis import Engine
    model_path = resolve_model(args.model)
    engine = Engine.load(model_path, threads=args.threads)
    options = RenderOptions(Path(args.output), fmt=args.format, name=args.name, batch=args.batch,
                            resume=args.resume, seed=args.seed, skip_invalid=args.skip_invalid,
                            defaults={"speaker": args.speaker, "language": args.language, "instruct": args.instruct,
                                      "voice": str(Path(args.voice).resolve()) if args.voice else None})
    if args.lexicon:
        from .text.lexicon import load_lexicons
        options.lexicon, options.lexicon_digest = load_lexicons(args.lexicon)
    plan = plan_render(args.script, engine, options)
    for n, ident, why in plan.invalid:
        print(f"skipped line {n}{f' ({ident})' if ident else ''}: {why}", file=sys.stderr)
    if plan.kept:
        print(f"resume: {len(plan.kept)} line(s) already rendered and unchanged", file=sys.stderr)
    if args.ray is not None:
        from .cluster import RayExecutor
        executor = RayExecutor(model_path, address=None if args.ray == "local" else args.ray, batch=args.batch,
                               threads=args.threads, node_model=args.node_model)
    else:
        executor = LocalExecutor(engine, args.batch)
    bar = tqdm(total=len(plan.jobs), unit="line", desc="render", disable=args.quiet or not sys.stderr.isatty())

    def on_line(job, entry, summary):
        bar.update(1)
        bar.set_postfix_str(f"{summary.audio_seconds:.0f} s audio, RTF {summary.rtf:.2f}")
        if entry["status"] == "failed":
            bar.write(f"line {job.line.number} ({job.line.id}) failed: {entry['error']}", file=sys.stderr)
        elif entry.get("warning"):
            bar.write(f"line {job.line.number} ({job.line.id}): {entry['warning']}", file=sys.stderr)
        elif not bar.disable:
            return
        elif not args.quiet:
            print(f"{job.line.id}: {entry['status']} ({summary.done + summary.failed}/{len(plan.jobs)})",
                  file=sys.stderr)
    try:
        summary = render(plan, executor, on_line)
    finally:
        bar.close()
        close = getattr(executor, "close", None)
        if close:
            close()
    speed = (f"; {summary.audio_seconds:.1f} s of audio in {summary.wall_seconds:.1f} s (RTF {summary.rtf:.2f})"
             if summary.audio_seconds else "")
    print(f"{args.output}: {summary.done} rendered, {summary.kept} kept, {summary.failed} failed, "
          f"{summary.skipped} skipped, {summary.warnings} warning(s){speed}; manifest "
          f"{Path(args.output) / 'manifest.jsonl'}")
    return 0 if summary.ok and not summary.skipped else 1


def _cmd_say(args) -> int:
    import numpy as np

    from .audio_io import write_audio
    from .demo import resolve_model
    from .long_text import one_prompt_text
    from .requests import SamplingParams
    from .synthesis import Engine
    from .text.join import JoinSettings
    text = args.text if args.text is not None else read_text_file(args.text_file)
    check_output_path(args.output)   # before minutes of synthesis, not after
    if args.codes_out:
        check_output_path(args.codes_out)
    engine = Engine.load(resolve_model(args.model), threads=args.threads, placement=args.placement,
                         overlap=args.overlap)
    info = engine.info
    if info.random_weights:
        print(f"note: {info.path.name} has random weights and produces noise", file=sys.stderr)
    sampling = SamplingParams.from_model(info, seed=args.seed)
    for name in ("temperature", "top_k", "top_p", "max_frames"):
        if getattr(args, name) is not None:
            setattr(sampling, name, getattr(args, name))
    if args.greedy:
        sampling = sampling.greedy()
    voice = None
    if args.voice:
        from .voice import load_voice
        voice = load_voice(args.voice, engine.model)
    composition = _compose_for_say(engine, text, args, voice)
    prompt = one_prompt_text(text, composition, JoinSettings(trim_silence=args.trim_silence))
    if prompt is None:
        return _say_long(engine, composition, sampling, args)
    chunk = composition.chunks[0]   # one prompt, as every front end speaks it (long_text.one_prompt_text)
    request = dict(speaker=chunk.cast.speaker, language=chunk.language, instruct=chunk.cast.instruct,
                   voice=chunk.cast.voice, sampling=sampling, streaming_text=args.streaming_text)
    if args.stream:
        stream = engine.stream(prompt, one_prompt=True, **request)
        try:
            for _ in stream:
                pass
        except KeyboardInterrupt:
            stream.cancel()
            stream.wait()
            raise
        result = stream.result
    else:
        result = engine.synthesize(prompt, one_prompt=True, **request)
    write_audio(args.output, result.audio, result.sample_rate)
    if args.codes_out:
        np.save(args.codes_out, result.codes)
    _print_rewrites(composition)
    print(f"wrote {args.output}: {result.timings.audio_seconds:.2f} s of audio, stopped by {result.stop_reason}")
    print(result.timings.summary())
    return 0


def _compose_for_say(engine, text: str, args, voice):
    """The text as chunks and pauses (text/compose.py) with the command's voice, cast and lexicon."""
    from .cast import load_cast, model_cast
    from .text.compose import Cast, Pauses, compose
    from .text.sentences import Budget
    cast = load_cast(args.cast, engine.model) if args.cast else model_cast(engine.model)
    from .text.lexicon import load_lexicons
    lexicon = load_lexicons(args.lexicon)[0] if args.lexicon else None
    return compose(text, default=Cast(speaker=args.speaker, instruct=args.instruct, voice=voice),
                   language=args.language, cast=cast, languages=engine.info.languages, lexicon=lexicon,
                   budget=Budget(args.max_chars, args.max_tokens),
                   pauses=Pauses(args.pause_sentence, args.pause_paragraph), seed=args.seed,
                   count_tokens=engine.count_text_tokens)


def _say_long(engine, composition, sampling, args) -> int:
    """Several chunks (or pauses, or trimming): spoken through the batched engine and joined."""
    import numpy as np

    from .audio_io import write_audio
    from .long_text import speak
    from .text.join import JoinSettings
    chunks = composition.chunks
    bar = None
    if sys.stderr.isatty():
        from tqdm import tqdm
        bar = tqdm(total=len(chunks), unit="chunk", desc="speaking", file=sys.stderr)
    try:
        result = speak(engine, composition, sampling, JoinSettings(trim_silence=args.trim_silence),
                       max_batch=args.batch, on_chunk=lambda take, total: bar.update(1) if bar else None)
    finally:
        if bar is not None:
            bar.close()
    write_audio(args.output, result.audio, result.sample_rate)
    if args.codes_out:
        np.save(args.codes_out, result.codes)
    _print_rewrites(composition)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    frames = sum(len(c.result.codes) for c in result.chunks)
    print(f"wrote {args.output}: {result.audio_seconds:.2f} s of audio in {len(chunks)} chunk(s), {frames} frames")
    print(f"TTFA {result.ttfa_ms:.0f} ms, {result.total_ms / 1000:.2f} s in all, RTF {result.rtf:.2f}")
    return 0


def _print_rewrites(composition) -> None:
    for chunk in composition.chunks:
        for r in chunk.rewrites:
            print(f"lexicon: chunk {chunk.index + 1}: {r.term!r} -> {r.replacement!r} ({r.source})")


def _cmd_voice_create(args) -> int:
    from .demo import resolve_model
    from .model_file import open_model
    from .voice import create_voice, save_voice
    model = open_model(resolve_model(args.model))
    voice = create_voice(model, args.audio, text=args.text, threads=args.threads)
    save_voice(voice, args.output, model)
    kind = (f"in-context voice ({len(voice.ref_codes)} reference frames + transcript)" if voice.ref_codes is not None
            else f"x-vector voice ({len(voice.x_vector)} values)")
    print(f"wrote {args.output}: {kind} for {model.info.path.name}")
    return 0


def _cmd_bench(args) -> int:
    from .bench import main_bench
    return main_bench(args)


def _cmd_devices(args) -> int:
    from kazeia import _native

    from .platform_info import cpu_level, describe_cpu_level, ggml_build
    if args.levels:   # (for scripts: the levels to run the kernel checks at)
        print(*cpu_level()["available"])
        return 0
    devices = _native.devices()
    build, level = ggml_build(), cpu_level()
    if args.json:
        print(json.dumps({"ggml_build": {"flavor": build.flavor, "backends": list(build.backends), "stamp": build.stamp},
                          "cpu_level": level, "devices": devices}, indent=2))
        return 0
    print(f"{build.describe()} (setup.sh: {build.stamp or 'no record'})")
    for line in describe_cpu_level(level):
        print(line)
    for d in devices:
        caps = [c for c in ("async", "buffer_from_host_ptr", "events") if d[c]]
        if d["host_buffer_type"]:
            caps.append(f"host_buffer {d['host_buffer_type']}")
        print(f"{d['name']:<10} {d['type']:<6} {d['description']}  "
              f"memory {d['memory_free'] / 2**30:.1f}/{d['memory_total'] / 2**30:.1f} GiB  caps: {', '.join(caps) or '-'}")
    from .placement import mode_status
    print("placement modes:")
    for status in mode_status(devices).values():
        print(f"  {status.mode:<14} {'available' if status.available else 'unavailable'}: {status.reason}")
    return _check_placements(args.model) if args.check else 0


def _check_placements(model: str) -> int:
    """Every available placement on a model (default the demo): where each stage ran, and how far
    its audio is from the CPU's. Fails when a stage scheduled onto an accelerator ran ops on the CPU."""
    import numpy as np

    from .accuracy import snr_db
    from .demo import resolve_model
    from .requests import SamplingParams
    from .synthesis import Engine
    from .placement import MODES, mode_status, silent_cpu_stages, stage_lines
    engine = Engine.load(resolve_model(model))
    sampling = SamplingParams.from_model(engine.info, max_frames=8).greedy()
    request = dict(speaker=engine.info.speakers[0].name) if engine.info.speakers else {}
    print(f"check on {model} (8 greedy frames; a first run on a new device compiles its kernels):")
    cpu, failed = None, False
    for mode in (m for m, st in mode_status().items() if st.available and m in MODES):
        engine.set_placement(mode)
        result = engine.synthesize("Where does each stage run?", sampling=sampling, **request)
        cpu = cpu if cpu is not None else result
        same = np.array_equal(result.codes, cpu.codes)
        decoded = engine.decode(cpu.codes)   # this placement's decoder on the CPU's codes
        print(f"  {mode}: codes {'identical to' if same else 'differ from'} cpu (random weights have flat logits), "
              f"decoder SNR vs cpu on the same codes {snr_db(cpu.audio, decoded):.1f} dB")
        for stage, line in stage_lines(result.placement_report).items():
            print(f"    {stage:<15} {line}")
        problems = silent_cpu_stages(result.placement_report)
        for p in problems:
            print(f"    ran on the CPU although scheduled onto an accelerator: {p}")
        failed = failed or bool(problems)
    return 1 if failed else 0


def thread_count(text: str) -> int:
    from .threads import check_threads
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


def build_parser() -> argparse.ArgumentParser:
    from .gguf_file import FILE_TYPES, HALF_OR_F32, type_mix_arg
    from .random_model import SIZES, VARIANTS
    p = argparse.ArgumentParser(prog="kazeia", description="Kazeia: local Qwen3-TTS speech synthesis on ggml")
    sub = p.add_subparsers(dest="command")

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
    c.set_defaults(func=_cmd_convert)

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
    pl.set_defaults(func=_cmd_pull)

    ms = sub.add_parser("models", help="the models pulled so far: list, info NAME, rm NAME, available")
    ms.add_argument("--json", action="store_true")
    msub = ms.add_subparsers(dest="models_command")
    ml = msub.add_parser("list", help="registered models (the default)")
    ml.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    ma = msub.add_parser("available", help="the released checkpoints kazeia pull knows by alias")
    ma.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    mi = msub.add_parser("info", help="one registered model: its record and its file's summary")
    mi.add_argument("name")
    mi.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    mr = msub.add_parser("rm", help="forget a model and delete its file")
    mr.add_argument("name")
    mr.add_argument("--keep-file", action="store_true", help="forget it but keep the file")
    ms.set_defaults(func=_cmd_models)

    r = sub.add_parser("make-random-model", help="write a model with deterministic random weights (no torch)")
    r.add_argument("-o", "--output", required=True)
    r.add_argument("--size", choices=SIZES, default="tiny")
    r.add_argument("--variant", choices=VARIANTS, default="custom_voice")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--type", type=type_mix_arg, default=None, metavar="TYPE",
                   help="as for convert, e.g. q6_k or talker=q5_k,code_predictor=q6_k (default q8_0; tiny: 5 MB)")
    r.add_argument("--decoder-type", choices=HALF_OR_F32, default=None)
    r.add_argument("-q", "--quiet", action="store_true")
    r.set_defaults(func=_cmd_random)

    rn = sub.add_parser("render", help="render a script (.txt, .csv, .tsv, .jsonl) to a folder of audio files, resumably")
    rn.add_argument("script", help="one utterance per line (.txt), or columns id, text and optionally speaker, language, "
                                   "instruct, voice, seed, file, temperature, top_k, top_p, ... (.csv/.tsv/.jsonl)")
    rn.add_argument("--model", required=True, help='a GGUF file, or "demo"')
    rn.add_argument("-o", "--output", required=True, help="folder for the audio files and manifest.jsonl")
    rn.add_argument("--format", choices=["wav", "wav16", "flac"], default="wav",
                    help="wav: 32-bit float (default); wav16: 16-bit PCM; flac: 24-bit")
    rn.add_argument("--name", default="{id}", help="output file name: {id}, {index}, {speaker} (default {id}; a "
                                                   "line's own 'file' column wins)")
    rn.add_argument("--batch", type=int, default=4, help="lines generated together (default 4)")
    rn.add_argument("--resume", action="store_true",
                    help="keep lines already rendered from the same request (their file complete), render the rest")
    rn.add_argument("--seed", type=int, default=0, help="seed of lines without their own (default 0)")
    rn.add_argument("--speaker", default=None, help="speaker of lines without one (CustomVoice models)")
    rn.add_argument("--language", default=None, help="language of lines without one (default auto)")
    rn.add_argument("--instruct", default=None, help="instruction of lines without one (VoiceDesign models)")
    rn.add_argument("--voice", default=None, help="voice profile of lines without one (Base models)")
    rn.add_argument("--skip-invalid", action="store_true", help="render the valid lines; list the others")
    rn.add_argument("--lexicon", action="append", default=None,
                    help="pronunciation rules (.toml or .csv) for every line; repeat to add files, later ones win")
    rn.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                    help="render on a Ray cluster: no address starts a local one; ADDRESS joins one "
                         "(pip install 'kazeia[cluster]')")
    rn.add_argument("--node-model", default=None,
                    help="with --ray: the model's path on every node, when it differs from --model's")
    rn.add_argument("--threads", type=thread_count, default=None, help="compute threads (default: every core; fewer while other processes hold some)")
    rn.add_argument("-q", "--quiet", action="store_true")
    rn.set_defaults(func=_cmd_render)

    i = sub.add_parser("info", help="describe a model file")
    i.add_argument("model", help='a GGUF file, a registered name (kazeia models), or "demo" for the bundled demo model')
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=_cmd_info)

    dc = sub.add_parser("decode", help="decode codes [frames, 16] (.npy) into audio")
    dc.add_argument("--model", required=True, help='a GGUF file, or "demo"')
    dc.add_argument("--codes", required=True, help=".npy file of integer codes, shape [frames, 16]")
    dc.add_argument("-o", "--output", required=True, help="output .wav (float) or .flac")
    dc.add_argument("--stream", action="store_true", help="decode frame by frame, as during generation")
    dc.add_argument("--one-pass", action="store_true",
                    help="no 300-frame chunk restarts (the reference restarts; this differs after 24 s)")
    dc.add_argument("--threads", type=thread_count, default=None, help="compute threads (default: every core; fewer while other processes hold some)")
    dc.set_defaults(func=_cmd_decode)

    s = sub.add_parser("say", help="speak text into an audio file",
                       formatter_class=DefaultsHelpFormatter,
                       description="Sampling defaults (temperature, top-k, top-p) are the model's own "
                                   "(kazeia info MODEL); threads: every core this process may use "
                                   "($KAZEIA_THREADS overrides), fewer while other processes hold some.")
    s.add_argument("--model", required=True, help='a GGUF file, a registered name (kazeia models), or "demo"')
    text = s.add_mutually_exclusive_group(required=True)
    text.add_argument("--text", default=None, help="the text to speak")
    text.add_argument("--text-file", default=None, help="read the text from a UTF-8 file")
    s.add_argument("-o", "--output", required=True, help=".wav (float) or .flac")
    s.add_argument("--speaker", default=None, help="CustomVoice speaker")
    s.add_argument("--language", default="auto", help="a language the model knows (kazeia info MODEL), or auto")
    s.add_argument("--instruct", default=None, help="voice description (VoiceDesign, 1.7B CustomVoice)")
    s.add_argument("--voice", default=None, help="voice profile (Base models)")
    s.add_argument("--seed", type=int, default=0, help="sampling seed (the same seed gives the same audio)")
    s.add_argument("--greedy", action="store_true", help="argmax everywhere (parity with the reference)")
    s.add_argument("--temperature", type=float, default=None, help="talker temperature (default: the model's)")
    s.add_argument("--top-k", type=int, default=None, help="talker top-k, 0 = off (default: the model's)")
    s.add_argument("--top-p", type=float, default=None, help="talker top-p (default: the model's)")
    s.add_argument("--max-frames", type=int, default=None, help="default: derived from the text length")
    s.add_argument("--stream", action="store_true", help="decode while generating (reports time to first audio)")
    feed = s.add_mutually_exclusive_group()
    feed.add_argument("--streaming-text", dest="streaming_text", action="store_true", default=None,
                      help="feed text while generating (default for Base)")
    feed.add_argument("--no-streaming-text", dest="streaming_text", action="store_false",
                      help="whole text in the prompt (default for CustomVoice and VoiceDesign)")
    s.add_argument("--codes-out", default=None, help="also save the codes [frames, 16] as .npy")
    long = s.add_argument_group("long texts, dialogue and pauses (docs/speaking.md)")
    long.add_argument("--cast", default=None,
                      help="TOML file naming the voices [voice=NAME] and 'Name: text' lines may use")
    long.add_argument("--lexicon", action="append", default=None,
                      help="pronunciation rules (.toml or .csv); repeat to add files, later ones win")
    long.add_argument("--pause-sentence", type=float, default=150.0, help="ms of silence between chunks")
    long.add_argument("--pause-paragraph", type=float, default=600.0, help="ms of silence at a paragraph break")
    long.add_argument("--trim-silence", action="store_true", help="trim each chunk's leading and trailing silence")
    long.add_argument("--max-chars", type=int, default=250, help="characters per chunk at most")
    long.add_argument("--max-tokens", type=int, default=64, help="text tokens per chunk at most")
    long.add_argument("--batch", type=int, default=4, help="chunks synthesized together")
    s.add_argument("--threads", type=thread_count, default=None, help="compute threads (default: every core; fewer while other processes hold some)")
    s.add_argument("--placement", default="cpu", choices=["cpu", "accel-weights", "accel-sched"],
                   help="where the stages run (kazeia devices lists what is available)")
    s.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=None, help=OVERLAP_HELP)
    s.set_defaults(func=_cmd_say)

    v = sub.add_parser("voice", help="voice profiles for Base models")
    vsub = v.add_subparsers(dest="voice_command", required=True)
    vc = vsub.add_parser("create", help="make a voice profile from reference audio")
    vc.add_argument("--model", required=True, help="a Base model (GGUF)")
    vc.add_argument("--audio", required=True, help="reference audio: any format, rate and channel count")
    vc.add_argument("--text", default=None, help="its transcript: in-context cloning (else x-vector only)")
    vc.add_argument("-o", "--output", required=True, help="voice profile to write (.kzvoice)")
    vc.add_argument("--threads", type=thread_count, default=None, help="compute threads (default: every core; fewer while other processes hold some)")
    vc.set_defaults(func=_cmd_voice_create)

    b = sub.add_parser("bench", help="benchmark on full-size random weights (JSON)")
    b.add_argument("--stage", choices=["all", "decoder"], default="all",
                   help="all: the whole pipeline per stage (default); decoder: the speech decoder alone")
    b.add_argument("--type", type=type_mix_arg, default="q8_0", metavar="TYPE",
                   help="talker / code-predictor weights: a type or a per-stage mix (default q8_0)")
    b.add_argument("--divergence", nargs="*", type=type_mix_arg, default=None, metavar="TYPE",
                   help="also measure these types or mixes against f32 (logit KL, top-5, vox's gate per stage, "
                        "code agreement)")
    b.add_argument("--placements", nargs="*", choices=["cpu", "accel-weights", "accel-sched"], default=None,
                   help="time every placement (all when none named) stage by stage, with where each launch ran "
                        "and its accuracy against f32 on the CPU")
    b.add_argument("--contend", type=int, default=None, metavar="N",
                   help="time the pipeline idle and with N busy processes pinned to cores, alternating, at the "
                        "default thread policy and at a fixed count")
    b.add_argument("--cpu", type=lambda v: [x.strip() for x in v.split(",") if x.strip()], default=None,
                   metavar="LEVEL,...", help="also run at these CPU levels of Kazeia's kernels (x86-64: avx512, avxvnni, avx2; ARM64: "
                                            "i8mm, dotprod, neon; generic; "
                                            "KAZEIA_CPU), beside the default, alternating, one process per run")
    b.add_argument("--ggml-lib", default=None, metavar="DIR|LEVEL=DIR,...",
                   help="with --cpu: run the other levels on the ggml libraries in DIR (e.g. a build for AVX2 alone), "
                        "or each named level on its own (avxvnni=DIR1,avx2=DIR2), so that ggml's kernels stop at "
                        "that level too")
    b.add_argument("--overlap", action="store_true",
                   help="the decoder beside generation against the stages taking turns, alternating, offline and "
                        "streamed: wall ms per frame, RTF, TTFA, the gain, and whether the audio is the same")
    b.add_argument("--batch", type=batch_sizes, default=None, metavar="B,B,...",
                   help="many voices at once: time batches of these sizes (with 1) side by side: per-stream ms per "
                        "frame, aggregate frames per second and RTF, peak RSS")
    b.add_argument("--long", action="store_true",
                   help="a ~2,000-character text through the long-text front end: its chunks batched "
                        "(--batch, default 4) against one at a time, and TTFA against one sentence")
    b.add_argument("--serve", action="store_true",
                   help="the speech server on loopback with --clients concurrent streaming clients: p50/p95 TTFA "
                        "and aggregate throughput per count (--frames each, default 100)")
    b.add_argument("--clients", type=batch_sizes, default=[1, 2, 4, 8], metavar="N,N,...",
                   help="client counts for --serve")
    b.add_argument("--size", choices=SIZES, default="0.6b", help="random model to make and measure")
    b.add_argument("--frames", type=int, default=None,
                   help="frames per utterance (default 50; with --long a cap per chunk, default none)")
    b.add_argument("--threads", type=thread_count, default=None, help="compute threads (default: every core; fewer while other processes hold some)")
    b.add_argument("--runs", type=int, default=1,
                   help="alternate this many Kazeia and peer runs and report each one's median run")
    b.add_argument("--decoder-type", choices=HALF_OR_F32, default=None, help="default f16 (stage all), f32 (decoder)")
    b.add_argument("--model", default=None, help='benchmark this file (or "demo") instead of a cached random model')
    b.add_argument("--no-reference", action="store_true", help="skip the PyTorch reference")
    b.add_argument("--no-peers", action="store_true",
                   help="skip peer engines (vox-tts and qwen3synth; with --stage decoder ONNX Runtime; when "
                        "installed: all engines then run one shared checkpoint)")
    b.add_argument("--json", default=None, help="write the whole result as JSON to this file (- for the terminal)")
    b.add_argument("-q", "--quiet", action="store_true")
    b.set_defaults(func=_cmd_bench)

    sv = sub.add_parser("serve", help="an OpenAI-compatible speech server (docs/serving.md)",
                        formatter_class=DefaultsHelpFormatter)
    sv.add_argument("--model", required=True, help='a GGUF file, or "demo" for the bundled demo model')
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (beyond loopback: needs an API key)")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--wyoming", default=None, metavar="tcp://HOST:PORT",
                    help="also serve Wyoming (Home Assistant) there, e.g. tcp://127.0.0.1:10200 (it has no keys)")
    sv.add_argument("--cors-origin", action="append", default=None, metavar="ORIGIN",
                    help="let web pages from ORIGIN call the API (repeat for more; default: none)")
    sv.add_argument("--api-key", default=None, help="clients send Authorization: Bearer KEY (default: $KAZEIA_API_KEY)")
    sv.add_argument("--name", default=None, help="the model's name in requests (default: the file's stem)")
    sv.add_argument("--max-batch", type=int, default=4, help="requests synthesized together")
    sv.add_argument("--max-queue", type=int, default=16, help="requests waiting beyond those (more: 429)")
    sv.add_argument("--voices", default=None, help="folder of voice profiles (.kzvoice; Base models)")
    sv.add_argument("--voice-map", action="append", default=None, metavar="NAME=VOICE",
                    help="what an OpenAI voice name (alloy, ...) speaks as; repeat for more")
    sv.add_argument("--lexicon", action="append", default=None, help="pronunciation rules for every request")
    sv.add_argument("--request-timeout", type=float, default=300.0, help="seconds a request may run")
    sv.add_argument("--max-frames", type=int, default=None,
                    help="frames a request may make at most (12.5 a second of audio; default: the model's runaway guard)")
    feed = sv.add_mutually_exclusive_group()
    feed.add_argument("--streaming-text", dest="streaming_text", action="store_true", default=True,
                      help="feed each request's text while generating: first audio in ~0.2 s, joiners barely stall "
                           "a batch (a request may ask otherwise: its streaming_text field)")
    feed.add_argument("--no-streaming-text", dest="streaming_text", action="store_false",
                      help="the whole text in the prompt, as the reference wrapper does for CustomVoice and "
                           "VoiceDesign (prefill ~8x longer)")
    sv.add_argument("--shutdown-grace", type=float, default=10.0,
                    help="seconds running streams get to end after SIGTERM")
    sv.add_argument("--threads", type=thread_count, default=None, help="compute threads (default: every core)")
    sv.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=None, help=OVERLAP_HELP)
    sv.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                    help="serve on Ray Serve, one engine per replica: no address starts a local cluster; ADDRESS "
                         "joins one (pip install 'kazeia[cluster]')")
    sv.add_argument("--replicas", type=int, default=1, help="replicas with --ray")
    sv.set_defaults(func=_cmd_serve)

    d = sub.add_parser("devices", help="list ggml devices")
    d.add_argument("--json", action="store_true")
    d.add_argument("--levels", action="store_true",
                   help="print only the CPU levels of Kazeia's kernels this CPU can run, highest first, on one line")
    d.add_argument("--check", action="store_true",
                   help="run every available placement on a model: where each stage ran, audio vs cpu")
    d.add_argument("--model", default="demo", help="model for --check (default: the demo model)")
    d.set_defaults(func=_cmd_devices)
    return p


def _cmd_serve(args) -> int:
    from .serve.run import serve
    return serve(args)


def main(argv: list[str] | None = None) -> int:
    from .errors import ConversionError, ModelLoadError
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:   # plain `kazeia`: what it can do, not an error
        parser.print_help()
        return 0
    try:
        from .platform_info import check_cpu_level
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


if __name__ == "__main__":
    sys.exit(main())
