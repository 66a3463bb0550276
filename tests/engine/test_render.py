"""Rendering scripts: every format, validation listing every bad line, files equal to single
synthesis, a manifest, resume after kill -9 with no partial file, changed lines rendered again, a
failing line that stops nothing else."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import soundfile

from kazeia.engine import Engine, Request, SamplingParams, demo_model_path
from kazeia.engine.script.render import LocalExecutor, LineOutcome, RenderOptions, plan_render, read_manifest, render
from kazeia.engine.script.lines import ScriptError

from support.commands import SPEAKERS, kazeia, script_line, write_script


@pytest.fixture(scope="module")
def engine():
    return Engine.load(demo_model_path(), threads=2)



def test_forty_lines_render_to_the_files_single_synthesis_makes(engine, tmp_path):
    script = write_script(tmp_path / "script.csv")
    plan = plan_render(script, engine, RenderOptions(tmp_path / "out", batch=4))
    summary = render(plan, LocalExecutor(engine, 4))
    assert summary.ok and summary.done == 40 and summary.failed == 0
    files = sorted((tmp_path / "out").glob("*.wav"))
    assert [f.stem for f in files] == [f"line{i:02d}" for i in range(40)]
    manifest = read_manifest(tmp_path / "out")
    assert all(manifest[f"line{i:02d}"]["status"] == "done" for i in range(40))
    for i in (0, 17, 39):   # the same audio as one Engine.take of the line's Request
        alone = engine.take(Request(script_line(i), speaker=SPEAKERS[i % 5],
                                    sampling=SamplingParams.from_model(engine.info, seed=i, max_frames=4 + i % 5)))
        audio, sr = soundfile.read(tmp_path / "out" / f"line{i:02d}.wav", dtype="float32")
        assert sr == 24000 and np.array_equal(audio, alone.audio)
        e = manifest[f"line{i:02d}"]
        assert e["samples"] == len(alone.audio) and e["stop_reason"] == "limit" and e["timings"]["frames"] == 4 + i % 5
    with soundfile.SoundFile(files[0]) as f:   # the parameters travel with the file
        params = json.loads(f.comment)
    assert params["id"] == "line00" and params["sampling"]["seed"] == 0 and params["hash"] == manifest["line00"]["hash"]


def test_every_bad_line_is_listed_before_anything_renders(engine, tmp_path):
    script = tmp_path / "bad.jsonl"
    script.write_text("\n".join([
        json.dumps({"id": "a", "text": "Fine.", "speaker": "vivian"}),
        json.dumps({"id": "b", "text": "  ", "speaker": "vivian"}),
        json.dumps({"id": "a", "text": "Again.", "speaker": "vivian"}),
        json.dumps({"id": "c", "text": "Who?", "speaker": "nobody"}),
        json.dumps({"id": "d", "text": "Where?", "speaker": "vivian", "language": "klingon"}),
        json.dumps({"id": "e", "text": "Voice.", "speaker": "vivian", "voice": "missing.kzvoice"}),
        json.dumps({"id": "f", "text": "Odd.", "speaker": "vivian", "mood": "happy"}),
        "not json",
        json.dumps({"id": "g", "text": "Fine too.", "speaker": "ryan", "max_frames": 3}),
    ]) + "\n")
    with pytest.raises(ScriptError) as e:
        plan_render(script, engine, RenderOptions(tmp_path / "out"))
    assert e.value.problems == [(8, "", "not JSON: Expecting value")]   # unreadable lines first
    script.write_text("\n".join(line for line in script.read_text().splitlines() if line != "not json") + "\n")
    with pytest.raises(ScriptError) as e:
        plan_render(script, engine, RenderOptions(tmp_path / "out"))
    text = str(e.value)
    for want in ["line 2 (b): empty text", "line 3 (a): duplicate id 'a' (also line 1)", "line 4 (c): unknown speaker 'nobody'",
                 "line 5 (d): unknown language 'klingon'", "line 6 (e): voice profile missing.kzvoice not found",
                 "line 7 (f): unknown column(s) mood"]:
        assert want in text, text
    assert not (tmp_path / "out").exists()   # nothing rendered
    r = kazeia("render", script, "--model", "demo", "-o", tmp_path / "out", "--skip-invalid")
    assert r.returncode == 1, r.stderr   # rendered the rest; not everything
    assert "skipped line 4 (c)" in r.stderr and "2 rendered" in r.stdout
    statuses = {e["id"]: e["status"] for e in map(json.loads, (tmp_path / "out" / "manifest.jsonl").read_text().splitlines())}
    assert statuses["g"] == "done" and statuses["c"] == "skipped"


@pytest.mark.slow
def test_kill_9_then_resume_renders_only_what_is_missing(tmp_path):
    script = write_script(tmp_path / "script.csv", frames=lambda i: 30)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "kazeia.engine", "render", str(script), "--model", "demo", "-o", str(out), "--batch", "2",
           "--threads", "1", "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline:
        done = [e for e in read_manifest(out).values() if e.get("status") == "done"] if out.exists() else []
        if len(done) >= 6:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = read_manifest(out)
    assert 6 <= len(before) < 40
    for f in out.glob("*.wav"):   # every file under its own name is complete
        assert f.stem in before and soundfile.info(str(f)).frames == before[f.stem]["samples"]
    kept_mtimes = {f.name: f.stat().st_mtime_ns for f in out.glob("*.wav")}
    r = kazeia("render", script, "--model", "demo", "-o", out, "--resume", "--threads", "2", "-q")
    assert r.returncode == 0, r.stderr
    assert f"{40 - len(before)} rendered, {len(before)} kept" in r.stdout
    assert all((out / n).stat().st_mtime_ns == m for n, m in kept_mtimes.items())   # not rendered again
    assert len(list(out.glob("*.wav"))) == 40 and not list(out.glob(".*partial*"))
    # a changed line is rendered again; the others are kept
    text = script.read_text().replace("Line number 7 of", "Line seven of")
    script.write_text(text)
    r = kazeia("render", script, "--model", "demo", "-o", out, "--resume", "-q")
    assert r.returncode == 0 and "1 rendered, 39 kept" in r.stdout, r.stdout


def test_a_failing_line_stops_nothing_else(engine, tmp_path):
    class OneFails(LocalExecutor):   # the engine's executor, with one line's result replaced by an engine error
        def run(self, jobs, folder, stop=lambda: False):
            for job, outcome in super().run(jobs, folder, stop):
                yield job, (LineOutcome(error="RuntimeError: graph compute failed") if job.line.id == "line03" else outcome)
    plan = plan_render(write_script(tmp_path / "s.csv", n=8), engine, RenderOptions(tmp_path / "out", batch=3))
    summary = render(plan, OneFails(engine, 3))
    assert summary.done == 7 and summary.failed == 1 and not summary.ok
    m = read_manifest(tmp_path / "out")
    assert m["line03"]["status"] == "failed" and "graph compute failed" in m["line03"]["error"]
    assert not (tmp_path / "out" / "line03.wav").exists()
    plan = plan_render(tmp_path / "s.csv", engine, RenderOptions(tmp_path / "out", batch=3, resume=True))
    assert [j.line.id for j in plan.jobs] == ["line03"]   # resume retries the failed line only
