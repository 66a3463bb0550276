#!/usr/bin/env bash
# Sets up everything and runs the test suite. Tests are chosen by folder and marker, never by name
# (docs/testing.md maps them):
#
#   bash scripts/test.sh [PYTEST...]           everything; CI runs exactly this (.ci/run)
#   bash scripts/test.sh --quick [PYTEST...]   the inner loop (minutes): the unit, parity and layering
#                                              tests at this CPU's own level, offscreen; no `slow`,
#                                              `gui`, `reference` or `arm64_host` test
#
# Everything: the engine against the official PyTorch reference (live, in its own venv .venv-ref), the
# workbench a second time on a virtual X display (offscreen hides focus and window-system problems),
# the kernel checks, parity tests and the rest of the native, engine and text layers at every lower CPU
# level of Kazeia's kernels (KAZEIA_CPU), the `accel` tests again with a real non-CPU ggml device
# (Vulkan on Mesa's lavapipe, a software GPU), and the ARM64 leg under emulation (scripts/arm64.sh).
# What only a new machine pays for (lavapipe's compiled pipelines, the arm64 root) is prepared in the
# background from the start. KAZEIA_GGML other than vulkan skips the Vulkan pass; KAZEIA_SKIP_ARM64=1
# the ARM64 leg.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
quick=""
[[ "${1:-}" == "--quick" ]] && { quick=1; shift; }
export KAZEIA_GGML="${KAZEIA_GGML:-vulkan}" OMP_WAIT_POLICY=PASSIVE
bash scripts/setup.sh --test
pytest=(.venv/bin/python -m pytest -p no:cacheprovider)
leg() { printf '\n== [%d s] %s\n' "$SECONDS" "$*"; }   # (seconds since the command began)

if [[ -n "$quick" ]]; then
  leg "quick tier: -m 'not (slow or gui or reference or arm64_host)'"
  exec env -u GGML_VK_VISIBLE_DEVICES "${pytest[@]}" tests -q -ra -m "not (slow or gui or reference or arm64_host)" "$@"
fi

# Two jobs run in the background (started below), beside the legs, on about a core each where a new
# machine would otherwise leave one idle for most of an hour: the Vulkan pass (step 5), whose first
# run compiles lavapipe's pipelines with LLVM one at a time (~30 min on a new machine, seconds from
# Mesa's cache), and the arm64 root with Kazeia's arm64 build for the ARM64 leg (step 4; ~20 min new,
# ~2 min under emulation when cached). Each one's output is printed where its step stands.
prep="$(mktemp -d)"
vulkan=""; [[ "$(cut -d- -f1 .venv/.kazeia-ggml)" == vulkan ]] && vulkan=1
# 5. the `accel` tests with Vulkan0 on lavapipe: placement and the workbench's placement A/B
vulkan_pass() {   # (in a subshell: lavapipe's environment stays there)
  eval "$(bash scripts/vulkan_deps.sh lavapipe)"
  devices="$(.venv/bin/kazeia devices)"   # (captured: `| grep -q` closes the pipe on kazeia mid-write)
  grep -q '^Vulkan0' <<< "$devices" || { echo "lavapipe is not visible to ggml" >&2; echo "$devices"; exit 1; }
  # lavapipe compiles each of ggml's pipelines on first use: on an empty shader cache (a new machine)
  # minutes per stage, longer than a test should wait for one take. Every `accel` test runs the tiny
  # CustomVoice checkpoint converted to f32 (each weight type is pipelines of its own: the demo's
  # q8_0/f16 ones were half an hour more), so one accel-sched stream of it compiles what they need
  # outside any test's time limit; later runs read the cache.
  local start=$SECONDS
  .venv/bin/kazeia convert tests/golden/checkpoints/tiny-custom_voice --type f32 -o "$prep/warm-up.gguf" -q
  .venv/bin/kazeia say --model "$prep/warm-up.gguf" --placement accel-sched --speaker vivian --stream \
    --max-frames 6 --text "Pipelines compiled once." -o "$prep/warm-up.wav"
  echo "lavapipe's pipelines for the accel tests' model ready after $(( SECONDS - start )) s (cached in $MESA_SHADER_CACHE_DIR)"
  # (a pytest of its own beside the legs' pytest: its own temporary folder)
  "${pytest[@]}" --basetemp="$prep/vulkan-tmp" tests -ra -m accel "$@"
}
arm64=""
if [[ -n "${KAZEIA_SKIP_ARM64:-}" ]]; then
  echo "KAZEIA_SKIP_ARM64 is set: the ARM64 leg is skipped" >&2
elif [[ "$(uname -m)" != x86_64 || $(id -u) -ne 0 ]]; then
  echo "the ARM64 leg needs root on an x86-64 Linux host (here: $(uname -m), uid $(id -u)): skipped" >&2
else
  arm64=1
fi
# the reference's venv is the same for every clone (PyPI packages by a stamped recipe): made once in
# the cache, not again in each new clone (~1 min)
ref_venv="${KAZEIA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kazeia}/venv-ref"
bash tests/reference/setup_venv.sh "$ref_venv"
export KAZEIA_REQUIRE_REFERENCE=1 KAZEIA_REF_PYTHON="$ref_venv/bin/python"
# Pipecat (an agent framework whose Deepgram plugin drives the live socket) pins what the project's
# venv cannot share: its own venv, made once in the cache (~30 s)
pipecat_venv="$(dirname "$ref_venv")/venv-pipecat"
bash tests/serve/setup_pipecat_venv.sh "$pipecat_venv"
export KAZEIA_PIPECAT_PYTHON="$pipecat_venv/bin/python"

# (what they install from Debian comes first, in the foreground: apt runs one at a time)
[[ -n "$vulkan" ]] && bash scripts/vulkan_deps.sh lavapipe > /dev/null
[[ -n "$arm64" ]] && bash scripts/arm64.sh host
declare -A prep_pid
kill_tree() { local child; for child in $(pgrep -P "$1"); do kill_tree "$child"; done; kill "$1" 2>/dev/null || true; }
trap 'for p in "${prep_pid[@]}"; do kill_tree "$p"; done; rm -rf "$prep"' EXIT   # (a failed leg stops them too)
if [[ -n "$vulkan" ]]; then (vulkan_pass "$@") > "$prep/vulkan.log" 2>&1 & prep_pid[vulkan]=$!; fi
# (the CPU build there: the host's Vulkan flavour would compile ggml's shaders with glslc under qemu,
# most of an hour, for a backend the leg does not test)
if [[ -n "$arm64" ]]; then KAZEIA_GGML=native bash scripts/arm64.sh setup > "$prep/arm64.log" 2>&1 & prep_pid[arm64]=$!; fi
# Waits for background job $1 and prints its output; its failure fails the run.
joined() {
  local ok=0
  wait "${prep_pid[$1]}" || ok=$?
  cat "$prep/$1.log"
  ((ok == 0)) || { echo "the background job '$1' failed (exit $ok)" >&2; exit 1; }
}

# 1. the workbench on a virtual X display, as users run it (Qt's offscreen platform hides focus and
# window-system problems); its size tests (`xvfb`) start X servers of their own
skip_gui=""
if command -v xvfb-run >/dev/null; then
  leg "the workbench on X11 (Xvfb)"
  xvfb-run -a -s "-screen 0 1280x800x24" env -u GGML_VK_VISIBLE_DEVICES QT_QPA_PLATFORM=xcb \
    "${pytest[@]}" tests/workbench -q -ra "$@"
  skip_gui=" or gui"   # (not again offscreen below)
else
  echo "xvfb-run missing: the workbench is tested offscreen only" >&2
fi

# 2. every other test at this CPU's own level, CPU only (a Vulkan build lists no device until
# GGML_VK_VISIBLE_DEVICES admits lavapipe); the ARM64 leg runs the `arm64_host` tests once its root is up
leg "every test on the CPU at its own level"
env -u GGML_VK_VISIBLE_DEVICES "${pytest[@]}" tests -ra -m "not (arm64_host$skip_gui)" --durations=25 "$@"

# 3. Kazeia's kernels at every lower CPU level this CPU allows (KAZEIA_CPU caps them), so the AVX2 and
# generic paths (most laptops; any other CPU) are tested, not assumed: what the kernels compute (the
# kernel checks, the parity tests, and the `levels` tests that compare numbers across paths: a stream
# against offline, a batch against one alone, threads, placements; the `arm64` ones are of that kind
# too), but for the slow `levels` ones. The machinery around them (the command line, voices, renders,
# benches, clusters), the text front end, the reference, the workbench, serving and models run once,
# at this CPU's own level: a lower level changes no code of theirs.
read -r -a levels <<< "$(.venv/bin/kazeia devices --levels)"
for level in "${levels[@]:1}"; do
  leg "kernels, parity and the numbers across paths at KAZEIA_CPU=$level (this CPU: ${levels[0]})"
  env -u GGML_VK_VISIBLE_DEVICES KAZEIA_CPU="$level" "${pytest[@]}" tests/native tests/engine -q -ra \
    -m "(kernels or parity or ((levels or arm64) and not slow)) and not (accel or arm64_host)" "$@"
done

# 4. ARM64 under emulation (scripts/arm64.sh): an arm64 Debian root and Kazeia's arm64 build (cached
# in ~/.cache/kazeia/arm64, set up in the background above), the CPU levels of emulated cores, the
# kernel checks at every ARM level and the `arm64` tests. It needs root (a chroot) and an x86-64 host;
# KAZEIA_SKIP_ARM64=1 leaves it out (CI never sets it).
if [[ -n "$arm64" ]]; then
  leg "the arm64 root and Kazeia's arm64 build, set up in the background since the start:"
  joined arm64
  leg "ARM64 leg (emulated)"
  bash scripts/arm64.sh checks "$@"
fi

# 5. the `accel` tests on Vulkan0 (lavapipe), from the background job above: on a new machine it is
# still compiling pipelines when the CPU legs end, so the ARM64 leg goes first
if [[ -n "$vulkan" ]]; then
  leg "the accel tests on Vulkan0 (lavapipe), run in the background since the start:"
  joined vulkan
else
  echo "ggml is not the Vulkan build (KAZEIA_GGML=$KAZEIA_GGML): the Vulkan pass is skipped" >&2
fi
leg "all passed"
