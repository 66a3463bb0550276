"""`kazeia decode`: codes into audio."""
from __future__ import annotations


from .options import (THREADS_HELP, thread_count)


def add_parser(sub) -> None:
    dc = sub.add_parser("decode", help="decode codes [frames, 16] (.npy) into audio")
    dc.add_argument("--model", required=True, help='a GGUF file, or "demo"')
    dc.add_argument("--codes", required=True, help=".npy file of integer codes, shape [frames, 16]")
    dc.add_argument("-o", "--output", required=True, help="output .wav (float) or .flac")
    dc.add_argument("--stream", action="store_true", help="decode frame by frame, as during generation")
    dc.add_argument("--one-pass", action="store_true",
                    help="no 300-frame chunk restarts (the reference restarts; this differs after 24 s)")
    dc.add_argument("--threads", type=thread_count, default=None, help=THREADS_HELP)
    dc.set_defaults(func=run)


def run(args) -> int:
    import time

    import numpy as np

    from ..audio_io import write_audio
    from ..model_files.demo import resolve_model
    from ..model_files.model_file import open_model
    from ..synthesis.speech_decoder import SpeechDecoder
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
