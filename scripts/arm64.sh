#!/usr/bin/env bash
# Kazeia on ARM64 Linux, on an x86-64 Debian machine, under emulation (Debian's qemu-user-static): an
# arm64 Debian root made once and cached, the host's files bind-mounted at the same paths inside it,
# and scripts/setup.sh run in it as on any arm64 Debian. Run as root (chroot, mounts); CI runs `test`.
#
#   bash scripts/arm64.sh setup              the arm64 root and Kazeia's arm64 venv in it (cached)
#   bash scripts/arm64.sh test [PYTEST...]   the ARM64 leg: setup, the CPU-level checks on emulated cores,
#                                            the kernel checks and parity tests at every ARM level
#   bash scripts/arm64.sh run CMD...         CMD on arm64 in the current folder, the arm64 venv's
#                                            `kazeia` and `python` first on PATH
#
# QEMU_CPU picks the emulated core for `run` (default max: NEON, dotprod, i8mm). Timings under
# emulation mean nothing: only results are tested here.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${KAZEIA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kazeia}/arm64"

# --- the arm64 root: Debian 13 (PySide6 6.11's arm64 wheels need glibc 2.39; Debian 12 has 2.36) ---
suite=trixie
packages=(python3 python3-venv python3-dev g++ make cmake ninja-build git ca-certificates
  # what setup.sh would install: the workbench's libraries, rubberband, and for --test an X server
  # (the leg runs plain setup.sh; these keep `setup.sh --test` in the root from installing more)
  libportaudio2 fonts-dejavu-core libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3 rubberband-cli
  xvfb xauth libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxkbcommon-x11-0)
recipe="$suite ${packages[*]}"
root="$cache/root-$(sha256sum <<< "$recipe" | cut -c1-10)"
venv=/opt/kazeia-venv   # (inside the root: it is cached with the Python it was made for)
# The builds run the host's x86-64 cross compiler (Debian's gcc-aarch64-linux-gnu) inside the root, at
# native speed: the host's /usr at /opt/host-usr, its x86-64 libraries and loader at their own paths
# (no arm64 file lives there) and the cross toolchain's arm64 libc for the linker. gcc under qemu takes
# ~12 min for ggml alone, the cross compiler ~2 min for ggml and Kazeia; both make the same arm64 code.
cross=/opt/host-usr/bin/aarch64-linux-gnu
# ggml for the emulated cores: GGML_NATIVE cannot probe a core through qemu, so ggml is built for a
# Cortex-A76-class target (fp16 arithmetic and SDOT, as most ARM tablets since 2019); its code then
# runs on QEMU_CPU=cortex-a76, neoverse-n1 or max, not on an ARMv8.0 core such as cortex-a53.
ggml_arch="${KAZEIA_GGML_ARM_ARCH:-armv8.2-a+fp16+dotprod}"
export QEMU_CPU="${QEMU_CPU:-max}"

log() { printf '\n== [%ds] %s\n' "$SECONDS" "$*"; }   # (seconds since the script began)
die() { echo "arm64.sh: $*" >&2; exit 1; }

need_host() {   # qemu-user-static registered with binfmt_misc (flag F: usable inside a chroot), mmdebstrap
  [[ $(id -u) -eq 0 ]] || die "run as root (it makes a chroot and bind mounts)"
  local missing=()
  command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static binfmt-support)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu)
  if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
  [[ -e /proc/sys/fs/binfmt_misc/register ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  [[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]] || update-binfmts --enable qemu-aarch64
  grep -q enabled /proc/sys/fs/binfmt_misc/qemu-aarch64 || die "binfmt_misc does not run arm64 programs through qemu"
}

make_root() {   # once per recipe (~15 min on 2 cores: dpkg under qemu); an older recipe's root is removed
  [[ -f "$root/.complete" ]] && return
  log "making the arm64 Debian root ($suite) in $root"
  rm -rf "$root.tmp"
  mkdir -p "$cache"
  local include
  include="$(IFS=,; echo "${packages[*]}")"
  mmdebstrap --variant=apt --architectures=arm64,amd64 --include="$include" "$suite" "$root.tmp" \
    http://deb.debian.org/debian
  touch "$root.tmp/.complete"
  mv "$root.tmp" "$root"
  # (after the move: before it, the new root's own .tmp would match)
  find "$cache" -maxdepth 1 -name 'root-*' ! -name "$(basename "$root")" -exec rm -rf {} +
}

# enter CMD...: CMD in the root, in the current folder, in a private mount namespace (nothing stays
# mounted afterwards): the repository, $HOME and /tmp at their own paths, the arm64 venv first on PATH.
enter() {
  local binds=() d pass=()
  # (and the host's CA bundle: a proxy's own CA is in it, not in the root's)
  for d in /tmp "$HOME" "$repo" "$PWD" /etc/ssl/certs/ca-certificates.crt; do
    [[ -e "$d" ]] && binds+=("$d" "$d")
  done
  binds+=(/usr /opt/host-usr /usr/lib64 /usr/lib64 /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu
          /usr/aarch64-linux-gnu /usr/aarch64-linux-gnu)   # (the cross compiler, above)
  [[ -e "$root/lib64" ]] || ln -s usr/lib64 "$root/lib64"
  # the caller's settings for Kazeia, qemu, pip and pytest travel in; the rest of the host's do not
  while IFS='=' read -r d _; do
    [[ "$d" =~ ^(KAZEIA_|QEMU_|OMP_|PYTEST_|PIP_INDEX_URL|PIP_EXTRA_INDEX_URL|PIP_DEFAULT_TIMEOUT|https?_proxy|no_proxy|CI$) ]] \
      && pass+=("$d=${!d}")
  done < <(env)
  cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  unshare --mount --propagation private -- bash -euo pipefail -c '
    root="$1"; nbinds="$2"; shift 2
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    for ((i = 0; i < nbinds; i += 2)); do   # (pairs: host path, path inside)
      if [[ -d "$1" ]]; then mkdir -p "$root$2"; else touch "$root$2"; fi
      mount --bind "$1" "$root$2"
      shift 2
    done
    exec chroot "$root" "$@"' _ "$root" "${#binds[@]}" "${binds[@]}" \
    /usr/bin/env -i HOME="$HOME" LANG=C.UTF-8 TERM="${TERM:-dumb}" \
      PATH="$venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "${pass[@]}" \
      /bin/bash -c 'cd "$0" && exec "$@"' "$PWD" "$@"
}

# The root, then setup.sh in it as a user runs it (ggml and Kazeia built by the x86-64 cross compiler,
# cached), then the test runner the leg needs: the leg's tests need nothing else of the test extra
# (Ray, the OpenAPI fuzzer and pytest-qt are minutes more of emulated pip for tests not run here).
# pip does not byte-compile what it installs (minutes under emulation): Python compiles what it imports.
setup() {
  need_host
  make_root
  log "scripts/setup.sh on arm64 (QEMU_CPU=$QEMU_CPU)"
  (cd "$repo" && enter env KAZEIA_VENV="$venv" KAZEIA_GGML="${KAZEIA_GGML:-native}" PIP_NO_COMPILE=1 \
    KAZEIA_GGML_ARM_ARCH="$ggml_arch" CC="$cross-gcc" CXX="$cross-g++" CMAKE_BUILD_PARALLEL_LEVEL=2 \
    bash scripts/setup.sh)
  enter env PIP_NO_COMPILE=1 python -m pip install -q --disable-pip-version-check "pytest>=8" "pytest-timeout>=2.3"
}

# The ARM64 leg (what CI runs): which level each emulated core gets; Kazeia's kernel checks at every
# ARM level (KAZEIA_CPU caps them, as on x86), with the decoder's f16 weights against f32 where its
# products differ (Kazeia's NEON form from neon up, ggml's at generic); the parity tests (greedy codes
# against the reference's goldens, streamed == offline, batch == alone) on the core with every
# feature, and the goldens again on one without i8mm. Batches of 8 are left to x86: under emulation
# they take minutes each and test nothing batches of 4 do not.
leg() {
  # (no pytest-qt: the workbench is not tested on arm64, and its Qt needs libraries the root lacks)
  local pytest=(python -m pytest -p no:cacheprovider -p no:pytest-qt -q -ra --timeout=1800 --durations=5)
  local kernels=(tests/test_placement.py tests/test_batch.py tests/test_cli.py tests/test_speech_decoder.py)
  local checks="kernel or lanes or gemm or attention or panel or repacked or batch_products or f32_products_match or winograd or pairs"
  local parity=(tests/test_tts.py::test_greedy_codes_and_audio_match_reference
                tests/test_tts.py::test_stream_matches_synthesize_and_reports_timings
                tests/test_batch.py::test_golden_cases_inside_a_batch_match_the_reference
                tests/test_batch.py::test_a_sequence_alone_and_in_a_batch_at_full_block_counts
                tests/test_speech_decoder.py::test_every_stage_matches_the_reference
                tests/test_speech_decoder.py::test_streaming_equals_offline_for_any_feeding_pattern
                -k "not -8]")
  local core expected level k
  cd "$repo"
  for core in cortex-a53=neon cortex-a72=neon cortex-a76=dotprod neoverse-n1=dotprod max=i8mm; do
    expected="${core#*=}" core="${core%=*}"
    log "QEMU_CPU=$core: Kazeia's level must be $expected"
    QEMU_CPU="$core" enter python -c 'import sys; from kazeia import _native
names, d = _native.cpu_level_names(), _native.cpu_level()
want = sys.argv[1]
assert d["detected"] == d["level"] == want and d["available"] == names[names.index(want):], d
print("  ", d["level"], d["available"])' "$expected"
  done
  read -r -a levels <<< "$(QEMU_CPU=max enter python -c 'from kazeia import _native; print(*_native.cpu_level()["available"])')"
  for level in "${levels[@]}"; do
    k="$checks"
    # (the caps test runs `kazeia` at every level itself: once is enough)
    [[ "$level" == "${levels[0]}" ]] && k+=" or cpu_level_caps"
    [[ "$level" == "${levels[0]}" || "$level" == generic ]] && k+=" or f16_weights or f32_products"
    log "kernel checks at KAZEIA_CPU=$level (QEMU_CPU=max)"
    QEMU_CPU=max KAZEIA_CPU="$level" enter "${pytest[@]}" "${kernels[@]}" -k "$k" "$@"
  done
  log "parity tests on QEMU_CPU=max"
  QEMU_CPU=max enter "${pytest[@]}" "${parity[@]}" "$@"
  log "the goldens on QEMU_CPU=cortex-a76 (no i8mm)"
  QEMU_CPU=cortex-a76 enter "${pytest[@]}" tests/test_tts.py::test_greedy_codes_and_audio_match_reference "$@"
  same_products_as_x86
  dependencies_for_debian12
}

# The f32 products' NEON form against the x86-64 forms: the same seeded weights and columns, products
# and convolutions of several shapes (direct and in Winograd's form), made here and on arm64, must be
# equal bit for bit (one fused multiply-add chain per output in a fixed order, on both).
same_products_as_x86() {
  local host_python="$repo/.venv/bin/python" dir
  if [[ ! -x "$host_python" ]]; then
    log "no x86-64 venv ($host_python): the NEON form is not compared with the x86 forms"
    return
  fi
  log "the f32 products on arm64 (NEON) against x86-64 (AVX2/AVX-512), bit for bit"
  dir="$(mktemp -d)"
  local dump='import sys, numpy as np
from kazeia import _native
out = {}
for t in ("f16", "bf16"):
    for rows, cols, n in [(96, 672, 300), (192, 1344, 7), (16, 32, 1), (1024, 512, 4)]:
        applied, _, ours, alone = _native.compare_gemm_fma(t, rows, cols, n, seed=rows)
        assert applied and np.array_equal(ours, alone), (t, rows, cols, n)
        out[f"gemm-{t}-{rows}-{cols}-{n}"] = ours
    for ch, rows, taps, dil, n in [(96, 96, 7, 9, 300), (768, 768, 7, 3, 5), (32, 16, 7, 9, 20)]:
        applied, _, in_place, _ = _native.compare_conv_fma(t, ch, rows, taps, dil, n, seed=rows)
        assert applied, (t, ch, rows)
        out[f"conv-{t}-{ch}-{rows}-{taps}-{dil}-{n}"] = in_place
    for ch, rows, dil, period, frames in [(96, 96, 9, 1920, 1), (768, 768, 3, 32, 3), (32, 32, 9, 32, 2)]:
        applied, _, whole, by_frame, *_ = _native.compare_conv_winograd(t, ch, rows, dil, period, frames, seed=rows)
        assert applied and np.array_equal(whole, by_frame), (t, ch, rows, dil)
        out[f"winograd-{t}-{ch}-{rows}-{dil}-{period}-{frames}"] = whole
    for c_in, rows, period, frames in [(192, 288, 640, 1), (384, 768, 160, 2)]:
        applied, _, whole, by_frame, _ = _native.compare_tconv_pairs(t, c_in, rows, period, frames, seed=rows)
        assert applied and np.array_equal(whole, by_frame), (t, c_in, rows)
        out[f"pairs-{t}-{c_in}-{rows}-{period}-{frames}"] = whole
np.savez(sys.argv[1], **out)'
  "$host_python" -c "$dump" "$dir/x86.npz"
  QEMU_CPU=max enter python -c "$dump" "$dir/arm64.npz"
  "$host_python" -c 'import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert sorted(a.files) == sorted(b.files)
bad = [k for k in a.files if a[k].tobytes() != b[k].tobytes()]
assert not bad, f"arm64 differs from x86-64 in {bad}"
print(f"   {len(a.files)} products and convolutions: equal bit for bit")' "$dir/x86.npz" "$dir/arm64.npz"
  rm -rf "$dir"
}

# The root above is Debian 13; on arm64 Debian 12 (Python 3.11, glibc 2.36: also Raspberry Pi OS)
# every dependency must still come as a wheel that installs there: pip resolves them natively for
# that platform, installing nothing, and says which PySide6 it took (pyproject.toml's aarch64 rule).
dependencies_for_debian12() {
  local host_python="$repo/.venv/bin/python" reqs report v platforms=()
  [[ -x "$host_python" ]] || return 0
  log "Kazeia's dependencies as wheels for arm64 Debian 12 (Python 3.11, glibc 2.36), resolved"
  reqs="$(mktemp)" report="$(mktemp)"
  (cd "$repo" && "$host_python" -c 'import tomllib
from packaging.requirements import Requirement
env = {"platform_machine": "aarch64", "python_version": "3.11", "python_full_version": "3.11.2",
       "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "extra": ""}
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
for line in project["dependencies"] + project["optional-dependencies"]["test"]:
    r = Requirement(line)
    if r.marker is None or r.marker.evaluate(env):
        r.marker = None
        print(r)') > "$reqs"
  for v in $(seq 36 -1 17); do platforms+=(--platform "manylinux_2_${v}_aarch64"); done
  "$host_python" -m pip install -q --disable-pip-version-check --dry-run --ignore-installed --target "$(mktemp -d)" \
    "${platforms[@]}" --platform manylinux2014_aarch64 --platform linux_aarch64 --implementation cp \
    --python-version 3.11 --only-binary=:all: --report "$report" -r "$reqs"
  "$host_python" -c 'import json, sys
picked = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"] for i in json.load(open(sys.argv[1]))["install"]}
print(f"   {len(picked)} packages, all wheels; PySide6-Essentials", picked["pyside6-essentials"])' "$report"
  rm -f "$reqs" "$report"
}

case "${1:-}" in
  setup) setup ;;
  run)
    shift
    (($#)) || die "usage: arm64.sh run CMD..."
    need_host
    [[ -x "$root$venv/bin/kazeia" ]] || setup >&2
    enter "$@" ;;
  test)
    shift
    setup
    leg "$@" ;;
  *) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
