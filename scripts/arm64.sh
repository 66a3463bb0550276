#!/usr/bin/env bash
# Kazeia on ARM64 Linux, on an x86-64 Debian machine, under emulation (Debian's qemu-user-static): an
# arm64 Debian root made once and cached, the host's files bind-mounted at the same paths inside it,
# and scripts/setup.sh run in it as on any arm64 Debian. Run as root (chroot, mounts); CI runs `setup`, then `checks`.
#
#   bash scripts/arm64.sh setup              the arm64 root and Kazeia's arm64 venv in it (cached)
#   bash scripts/arm64.sh test [PYTEST...]   the ARM64 leg: setup, the CPU-level checks on emulated cores,
#                                            the kernel checks and parity tests at every ARM level
#   bash scripts/arm64.sh checks [PYTEST...] the same checks on a root already set up (scripts/test.sh)
#   bash scripts/arm64.sh host               the host's packages (qemu-user-static, mmdebstrap, the cross compiler)
#   bash scripts/arm64.sh run CMD...         CMD on arm64 in the current folder, the arm64 venv's
#                                            `kazeia` and `python` first on PATH
#   bash scripts/arm64.sh ready              exit status 0 when the root and its venv are set up
#
# QEMU_CPU picks the emulated core for `run` (default max: NEON, dotprod, i8mm). Timings under
# emulation mean nothing: only results are tested here.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${KAZEIA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kazeia}/arm64"

# --- the arm64 root: Debian 13 (PySide6 6.11's arm64 wheels need glibc 2.39; Debian 12 has 2.36) ---
suite=trixie
# (no compiler: the host's cross compiler builds, below; no X server: the leg runs plain setup.sh)
packages=(python3 python3-venv python3-dev make cmake ninja-build git ca-certificates
  # what plain setup.sh would install: the workbench's libraries and rubberband
  libportaudio2 fonts-dejavu-core libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3 rubberband-cli)
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

make_root() {   # once per recipe (~10 min on 2 cores: dpkg under qemu); an older recipe's root is removed
  [[ -f "$root/.complete" ]] && return
  log "making the arm64 Debian root ($suite) in $root"
  rm -rf "$root.tmp"
  mkdir -p "$cache"
  local include
  include="$(IFS=,; echo "${packages[*]}")"
  # (dpkg under qemu: no fsync per file, no manuals, docs or translations to unpack)
  mmdebstrap --variant=apt --architectures=arm64,amd64 --include="$include" --dpkgopt=force-unsafe-io \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$suite" "$root.tmp" http://deb.debian.org/debian
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

# What the root's venv needs from PyPI, resolved and unpacked by the host's pip at native speed: the
# project's dependencies, its build requirements, pip and the test runner, as arm64 wheels for the
# root's Python and glibc (pip --platform/--target). The same pip run under emulation took over 14 min
# on 2 cores. setup.sh in the root then finds them met and builds Kazeia alone. Markers are the host's
# (pip evaluates them on the machine it runs on): a requirement met only on arm64 is installed by
# setup.sh in the root, as before.
host_wheels() {
  local pip_venv="$cache/host-pip"   # (the host's own pip, whatever python3 the host has)
  [[ -x "$pip_venv/bin/python" ]] || "${PYTHON:-python3}" -m venv "$pip_venv"
  # (pip 23 checks Requires-Python against the host's Python, not --python-version's)
  "$pip_venv/bin/python" "$repo/scripts/requirements_met.py" "pip>=24" >/dev/null \
    || "$pip_venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade "pip>=24"
  local py libc plats=() m
  read -r py libc < <(enter python3 -c 'import platform, sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}", platform.libc_ver()[1])')
  mapfile -t requirements < <(cd "$repo" && enter python3 - <<'PY'
import tomllib
with open("pyproject.toml", "rb") as f:
    toml = tomllib.load(f)
for r in toml["project"]["dependencies"] + toml["build-system"]["requires"]:
    if not r.startswith("libggml-python"):   # (setup.sh builds it in the root)
        print(r)
print("pip>=24", "pytest>=8", "pytest-timeout>=2.3", sep="\n")
PY
)
  # The venv is made again, whole, when what it was made from changes (a wheel replaced in place would
  # leave the old version's metadata beside the new one's).
  local recipe stamp="$root$venv/.host-wheels"
  recipe="$(printf '%s\n' "$py" "$libc" "$("$pip_venv/bin/python" -m pip --version | cut -d' ' -f2)" \
            "${requirements[@]}" | sha256sum | cut -c1-16)"
  [[ -x "$root$venv/bin/python" && "$(cat "$stamp" 2>/dev/null)" == "$recipe" ]] && return
  log "arm64 wheels for Python $py, glibc $libc: resolved and unpacked on the host"
  rm -rf "${root:?}$venv"
  enter python3 -m venv --without-pip "$venv"
  for ((m = ${libc#2.}; m >= 17; m--)); do plats+=(--platform "manylinux_2_${m}_aarch64"); done
  "$pip_venv/bin/python" -m pip install -q --disable-pip-version-check --no-compile \
    --only-binary=:all: "${plats[@]}" --python-version "$py" --implementation cp --abi "cp${py/./}" \
    --target "$root$venv/lib/python$py/site-packages" "${requirements[@]}"
  echo "$recipe" > "$stamp"
}

# The root, then setup.sh in it as a user runs it (ggml and Kazeia built by the x86-64 cross compiler,
# cached), then the test runner the leg needs: the leg's tests need nothing else of the test extra
# (Ray, the OpenAPI fuzzer and pytest-qt are minutes more of emulated pip for tests not run here).
# pip does not byte-compile what it installs (minutes under emulation): Python compiles what it imports.
setup() {
  need_host
  make_root
  host_wheels
  log "scripts/setup.sh on arm64 (QEMU_CPU=$QEMU_CPU)"
  # (the host's ccache, as on x86-64: the cross compiler's objects kept in the host's cache)
  local ccache=()
  command -v ccache >/dev/null && ccache=(CMAKE_C_COMPILER_LAUNCHER=/opt/host-usr/bin/ccache
                                          CMAKE_CXX_COMPILER_LAUNCHER=/opt/host-usr/bin/ccache)
  (cd "$repo" && enter env KAZEIA_VENV="$venv" KAZEIA_GGML="${KAZEIA_GGML:-native}" PIP_NO_COMPILE=1 \
    KAZEIA_GGML_ARM_ARCH="$ggml_arch" CC="$cross-gcc" CXX="$cross-g++" CMAKE_BUILD_PARALLEL_LEVEL=2 \
    "${ccache[@]}" bash scripts/setup.sh)
  enter bash -c 'python scripts/requirements_met.py "pytest>=8" "pytest-timeout>=2.3" >/dev/null ||
    PIP_NO_COMPILE=1 python -m pip install -q --disable-pip-version-check "pytest>=8" "pytest-timeout>=2.3"'
}

# The ARM64 leg (what CI runs), chosen by markers (docs/testing.md): the level each emulated core gets
# (tests/native/test_emulated_cores.py); the kernel checks at every ARM level that runs other kernels than
# the level above it (KAZEIA_CPU caps them, as on x86; `kazeia devices --kernels` names them), the slow ones (the decoder's f16 weights against f32, its audio in every form) at the highest
# and at generic only; the `arm64` tests (greedy codes against the reference's goldens, streamed ==
# offline, batch == alone, the CPU level caps) on the core with every feature, the goldens again on one
# without i8mm; then, on the host, the `arm64_host` tests: the NEON products against x86-64's bit for
# bit, and the dependencies as wheels for arm64 Debian 12. Batches of 8 are `slow`, left to x86: under
# emulation they take minutes each and test nothing batches of 4 do not.
leg() {
  # (no pytest-qt: the workbench is not tested on arm64, and its Qt needs libraries the root lacks;
  # tests/native and tests/engine import no Qt)
  local pytest=(python -m pytest -p no:cacheprovider -p no:pytest-qt -q -ra --timeout=1800 --durations=5)
  export KAZEIA_TEST_EMULATED=1   # (tests/conftest.py: `emulated`)
  local level marks
  cd "$repo"
  log "the CPU level of each emulated core"
  QEMU_CPU=max enter "${pytest[@]}" tests/native/test_emulated_cores.py "$@"
  read -r -a levels <<< "$(QEMU_CPU=max enter kazeia devices --levels)"
  local kernels checked=""
  for level in "${levels[@]}"; do
    # A level whose kernels are those of a level checked above runs the same code: no checks of its
    # own (on ARM64 every level above generic runs the same NEON forms; x86-64's levels all differ).
    kernels="$(QEMU_CPU=max KAZEIA_CPU="$level" enter kazeia devices --kernels)"
    if [[ "$level" != generic && "$kernels" == "$checked" ]]; then
      log "KAZEIA_CPU=$level runs the kernels checked at the level above ($kernels): nothing more to check"
      continue
    fi
    checked="$kernels"
    marks="kernels and not slow"
    [[ "$level" == generic ]] && marks="kernels"
    # (the top level is the core's own: the arm64 tests run there too, in the same process)
    [[ "$level" == "${levels[0]}" ]] && marks="kernels or (arm64 and not slow)"
    log "kernel checks at KAZEIA_CPU=$level (QEMU_CPU=max): -m '$marks'"
    QEMU_CPU=max KAZEIA_CPU="$level" enter "${pytest[@]}" tests/native tests/engine -m "$marks" "$@"
  done
  log "the goldens on QEMU_CPU=cortex-a76 (no i8mm)"
  QEMU_CPU=cortex-a76 enter "${pytest[@]}" tests/engine/test_tts.py -m "arm64 and parity" "$@"
  log "on the host: the arm64 root's products against x86-64's, its dependencies for Debian 12"
  if [[ -x "$repo/.venv/bin/python" ]]; then
    "$repo/.venv/bin/python" -m pytest -p no:cacheprovider -q -ra tests -m arm64_host "$@"
  else
    log "no x86-64 venv ($repo/.venv): the host's checks are skipped"
  fi
}

case "${1:-}" in
  host) need_host ;;
  setup) setup ;;
  ready) need_host && [[ -f "$root/.complete" && -x "$root$venv/bin/kazeia" ]] ;;
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
  checks)
    shift
    need_host
    [[ -x "$root$venv/bin/kazeia" ]] || die "the arm64 root is not set up: bash scripts/arm64.sh setup"
    leg "$@" ;;
  *) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
