"""`kazeia abx A B`: a blind listening test of two audio files in the terminal, on an audio output device
(engine/takes/blind_test.py; the workbench's Blind test dialog is the same test with buttons)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from .options import DefaultsHelpFormatter

HELP_ABX = "listen: a, b, x (s stops); answer: xa (X is A) or xb (X is B); q quits"
HELP_PREFERENCE = "listen: 1, 2 (s stops); answer: p1 or p2 (the better one); q quits"


def add_parser(sub) -> None:
    a = sub.add_parser("abx", help="a blind listening test of two audio files (ABX, or which sounds better)",
                       formatter_class=DefaultsHelpFormatter,
                       description="Both files are loudness-matched and played from the same position; which is "
                                   "which stays hidden until the last answer. " + HELP_ABX + ".")
    a.add_argument("a", help="sound A (any format soundfile reads)")
    a.add_argument("b", help="sound B")
    a.add_argument("--preference", action="store_true", help="ask which sounds better instead (blind, both orders)")
    a.add_argument("--trials", type=int, default=16, help="number of trials")
    a.add_argument("--seed", type=int, default=None, help="trial order (default: random; kept with the result)")
    a.add_argument("--start", type=float, default=0.0, help="seconds into both sounds where playing starts")
    a.add_argument("--no-match", dest="match", action="store_false", help="leave the loudness as it is")
    a.add_argument("--device", default=None, help="audio output device: a number or part of a name "
                                                   "(default: the system's)")
    a.add_argument("-o", "--output", default=None, help="write the result: .json or .csv")
    a.set_defaults(func=run)


def load_pair(a: str, b: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Both files as mono float32 at A's sample rate."""
    import soundfile
    sounds, rates = [], []
    for path in (a, b):
        try:
            audio, rate = soundfile.read(path, dtype="float32", always_2d=True)
        except (RuntimeError, soundfile.LibsndfileError) as e:
            raise ValueError(f"{path}: cannot read audio ({e})") from None
        if not len(audio):
            raise ValueError(f"{path}: no audio in the file")
        sounds.append(audio.mean(axis=1))
        rates.append(rate)
    if rates[1] != rates[0]:
        import soxr
        sounds[1] = soxr.resample(sounds[1], rates[1], rates[0], quality="VHQ").astype(np.float32)
    return sounds[0], sounds[1], rates[0]


class Player:
    """Plays one sound at a time on the chosen device, from a position."""

    def __init__(self, device: str | None, rate: int):
        try:
            import sounddevice
        except (ImportError, OSError) as e:
            raise ValueError(f"no audio output: {e}") from None
        self.sd, self.rate = sounddevice, rate
        try:
            outputs = [(i, d["name"]) for i, d in enumerate(sounddevice.query_devices()) if d["max_output_channels"] > 0]
        except Exception as e:   # (PortAudio errors when there is no device at all)
            raise ValueError(f"no audio output device: {e}") from None
        if not outputs:
            raise ValueError("no audio output device (a blind test needs one to play the sounds)")
        self.device = None
        if device is not None:
            match = [i for i, name in outputs if device == str(i) or device.casefold() in name.casefold()]
            if not match:
                raise ValueError(f"no audio output device {device!r}; there are: "
                                 + ", ".join(f"{i} {name}" for i, name in outputs))
            self.device = match[0]

    def play(self, audio: np.ndarray, start: int) -> None:
        self.sd.stop()
        self.sd.play(audio[start:], self.rate, device=self.device)

    def stop(self) -> None:
        self.sd.stop()


def run(args) -> int:
    from ..takes.blind_test import BlindTest
    from ..takes.loudness import matched_gain
    for path in (args.a, args.b):
        if not Path(path).is_file():
            raise ValueError(f"{path}: no such file")
    if args.output and Path(args.output).suffix not in (".json", ".csv"):
        raise ValueError(f"-o {args.output}: give a .json or .csv file")
    a, b, rate = load_pair(args.a, args.b)
    gains = (matched_gain(a, rate), matched_gain(b, rate)) if args.match else (1.0, 1.0)
    sounds = {"A": a * np.float32(gains[0]), "B": b * np.float32(gains[1])}
    test_args = {"kind": "preference" if args.preference else "abx", "trials": args.trials,
                 "a": {"label": Path(args.a).name, "file": str(Path(args.a).resolve())},
                 "b": {"label": Path(args.b).name, "file": str(Path(args.b).resolve())},
                 "gains_db": tuple(round(20 * np.log10(g), 2) for g in gains)}
    if args.seed is not None:
        test_args["seed"] = args.seed
    test = BlindTest(**test_args)
    player = Player(args.device, rate)
    start = max(0, int(args.start * rate))
    slots = ("a", "b", "x") if test.kind == "abx" else ("1", "2")
    answers = {"xa": "A", "xb": "B"} if test.kind == "abx" else {"p1": "1", "p2": "2"}
    print(f"{'ABX' if test.kind == 'abx' else 'preference'} test, {test.trials} trials, seed {test.seed}"
          + (f"; loudness matched ({test.gains_db[0]:+.1f} dB, {test.gains_db[1]:+.1f} dB)" if args.match else ""))
    print(HELP_ABX if test.kind == "abx" else HELP_PREFERENCE)
    try:
        while not test.finished:
            command = input(f"trial {test.trial + 1}/{test.trials}> ").strip().lower()
            if command in slots:
                player.play(sounds[test.sound(command.upper())], start)
            elif command == "s":
                player.stop()
            elif command in answers:
                player.stop()
                test.answer(answers[command])
            elif command == "q":
                print("stopped: no result (the test was not finished)", file=sys.stderr)
                return 1
            elif command:
                print(HELP_ABX if test.kind == "abx" else HELP_PREFERENCE)
    except EOFError:
        print("stopped: the input ended before the last trial; no result", file=sys.stderr)
        return 1
    finally:
        player.stop()
    print(f"A was {args.a}, B was {args.b}")
    print(test.verdict)
    if args.output:
        print(f"wrote {test.export(args.output)}")
    return 0
