#!/usr/bin/env bash
# Sets up Kazeia in ./.venv on Debian/Ubuntu: system packages if missing, the ggml build this machine
# can use best (see KAZEIA_GGML below), then the package itself with `pip install .`.
#
#   bash scripts/setup.sh [--test]        --test also installs the test dependencies
#
# KAZEIA_GGML picks the ggml build (auto|native|vulkan|cuda|wheel); PYTHON the interpreter (3.10+).
# On ARM64, KAZEIA_GGML_ARM_ARCH (e.g. armv8.2-a+fp16+dotprod) builds ggml for that target instead of
# probing this CPU (GGML_NATIVE): for a cross compiler or an emulated core (scripts/arm64.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python="${PYTHON:-python3}"
venv="${KAZEIA_VENV:-.venv}"
ggml_version="0.20.2.post1"
ggml_flavor="${KAZEIA_GGML:-auto}"
extras=""
[[ "${1:-}" == "--test" ]] && extras="[test,cluster]"   # (cluster: Ray, for the render-on-a-cluster tests)

log() { printf '\n== %s\n' "$*"; }

# --- system packages (only what is missing) -------------------------------------------
missing=()
deb_packages=(libportaudio2 fonts-dejavu-core libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3)   # workbench
deb_packages+=(rubberband-cli)   # kazeia serve: a speed other than 1.0 (pitch-preserving time-stretch)
[[ -n "$extras" ]] && deb_packages+=(xvfb xauth libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxkbcommon-x11-0)
if command -v dpkg-query >/dev/null; then
  for p in "${deb_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
fi
command -v "${CXX:-g++}" >/dev/null || missing+=(g++ make)   # (arm64.sh: the host's cross compiler)
command -v "${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}" >/dev/null || missing+=(ccache)   # (arm64.sh: the host's)
command -v git >/dev/null || missing+=(git)
"$python" -c "import ensurepip, venv" 2>/dev/null || missing+=(python3-venv)
"$python" -c "import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))" \
  2>/dev/null || missing+=(python3-dev)
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

# --- ccache: a build in another clone (CI's, a worktree) or after `git clean` reuses the objects
# compiled before (CCACHE_BASEDIR makes the clone's own path not matter); minutes to seconds
cache_root="${KAZEIA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kazeia}"
if command -v "${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}" >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-$cache_root/ccache}" CCACHE_BASEDIR="$PWD" \
    CMAKE_C_COMPILER_LAUNCHER="${CMAKE_C_COMPILER_LAUNCHER:-ccache}" \
    CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
fi

# --- virtual environment ----------------------------------------------------------------
if [[ ! -x "$venv/bin/python" ]]; then
  log "creating $venv ($("$python" --version))"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --disable-pip-version-check -q)
met() { "$venv/bin/python" scripts/requirements_met.py "$@" >/dev/null 2>&1; }   # (a pip run that changes nothing costs seconds)
met "pip>=24" || "${pip[@]}" --upgrade "pip>=24"

# --- ggml: the build this machine can use best ---------------------------------------------
# KAZEIA_GGML=auto (default) | native | vulkan | cuda | wheel
#   native  rebuilt from its sdist for this CPU (GGML_NATIVE, llamafile: 2-3.5x faster matrix-matrix work)
#   vulkan  native + the Vulkan backend (any Vulkan GPU; Mesa's lavapipe for tests: scripts/vulkan_deps.sh)
#   cuda    native + the CUDA backend (needs nvcc)
#   wheel   the prebuilt PyPI wheel (AVX2, CPU only)
#   auto    cuda when nvcc works and a GPU is listed, vulkan when a Vulkan loader sees a hardware GPU,
#           else native; a failed build falls back down that list, ending at the wheel.
# Built wheels are cached by flavor, CPU and build flags in ~/.cache/kazeia/ggml, so reruns don't
# rebuild; every build is checked to hold the backend it was asked for before it is cached or installed.
cache="$cache_root/ggml"
cpu_id="$( (grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null || uname -m) | sha256sum | cut -c1-10)"
# (another architecture's builds never share x86-64's keys: qemu-user shows the host's /proc/cpuinfo)
[[ "$(uname -m)" != x86_64 ]] && cpu_id="$(uname -m)-$cpu_id"

has_cuda_gpu() { nvcc --version >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep GPU >/dev/null; }
has_vulkan_gpu() {
  ldconfig -p 2>/dev/null | grep 'libvulkan.so.1' >/dev/null || return 1
  if command -v vulkaninfo >/dev/null; then
    vulkaninfo --summary 2>/dev/null | grep -E 'PHYSICAL_DEVICE_TYPE_(DISCRETE|INTEGRATED)_GPU' >/dev/null
  else
    ls /dev/dri/renderD* >/dev/null 2>&1 && ls /usr/share/vulkan/icd.d/ 2>/dev/null | grep -qv lvp
  fi
}

build_flags() {   # cmake definitions of a flavor
  local f=(-C cmake.define.GGML_NATIVE=ON -C cmake.define.GGML_LLAMAFILE=ON)
  if [[ "$(uname -m)" == aarch64 && -n "${KAZEIA_GGML_ARM_ARCH:-}" ]]; then
    f=(-C cmake.define.GGML_NATIVE=OFF -C "cmake.define.GGML_CPU_ARM_ARCH=$KAZEIA_GGML_ARM_ARCH" -C cmake.define.GGML_LLAMAFILE=ON)
  fi
  case "$1" in
    vulkan)
      eval "$(bash scripts/vulkan_deps.sh build)"
      f+=(-C cmake.define.GGML_VULKAN=ON)
      [[ -n "$KAZEIA_VULKAN_INCLUDE" ]] && f+=(-C "cmake.define.Vulkan_INCLUDE_DIR=$KAZEIA_VULKAN_INCLUDE")
      ;;
    cuda) f+=(-C cmake.define.GGML_CUDA=ON) ;;
  esac
  printf '%s\n' "${f[@]}"
}

# The identity of flavor $1's build: flavor, release, CPU and a hash of its build flags (and nvcc),
# so a cached wheel or an installed venv is only ever reused for the build it really is.
build_key() {
  local flavor="$1" key="$1-$ggml_version"
  [[ "$flavor" == wheel ]] && { echo "$key"; return; }
  key+="-$cpu_id-$(build_flags "$flavor" | sha256sum | cut -c1-8)"
  [[ "$flavor" == cuda ]] && key+="-$(nvcc --version | sha256sum | cut -c1-6)"
  echo "$key"
}

# Whether the venv's installed ggml holds flavor $1's backend library.
venv_has_backend() {
  local lib
  case "$1" in vulkan) lib=libggml-vulkan.so ;; cuda) lib=libggml-cuda.so ;; *) return 0 ;; esac
  ls "$venv"/lib/python*/site-packages/libggml/lib*/"$lib" >/dev/null 2>&1
}

# Installs flavor $1 (building its wheel once); fails when the build fails.
install_ggml() {
  local flavor="$1" dir wheel flags
  if [[ "$flavor" == wheel ]]; then
    "${pip[@]}" --force-reinstall --no-deps "libggml-python==$ggml_version"
    return
  fi
  mapfile -t flags < <(build_flags "$flavor")
  dir="$cache/$(build_key "$flavor")"
  wheel="$(ls "$dir"/libggml_python-*.whl 2>/dev/null | head -1)"
  if [[ -n "$wheel" ]] && ! "$python" scripts/check_ggml_wheel.py "$flavor" "$wheel"; then
    echo "discarding the cached wheel: it is not a $flavor build" >&2
    rm -rf "$dir"; wheel=""
  fi
  # (auto does not retry a build that failed on this machine; naming the flavor does)
  [[ -z "$wheel" && -f "$dir.failed" && "$ggml_flavor" == auto ]] && return 1
  if [[ -z "$wheel" ]]; then
    log "building ggml $ggml_version ($flavor; native ~1 min, vulkan ~6 min, cuda longer) into $dir"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    # --no-cache-dir: pip's wheel cache is keyed by the sdist alone, not by the -C flags, and would
    # hand back an earlier flavor's wheel as this one
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
      "$venv/bin/python" -m pip wheel --disable-pip-version-check --no-cache-dir -q --no-deps \
      --no-binary libggml-python "libggml-python==$ggml_version" "${flags[@]}" -w "$dir.tmp" \
      || { rm -rf "$dir.tmp"; touch "$dir.failed"; return 1; }
    wheel="$(ls "$dir.tmp"/libggml_python-*.whl | head -1)"
    "$python" scripts/check_ggml_wheel.py "$flavor" "$wheel" || { rm -rf "$dir.tmp"; touch "$dir.failed"; return 1; }
    rm -rf "$dir" "$dir.failed" && mv "$dir.tmp" "$dir"   # only a complete build is ever cached
    wheel="$(ls "$dir"/libggml_python-*.whl | head -1)"
  else
    log "ggml $ggml_version ($flavor) from the cache: $wheel"
  fi
  "${pip[@]}" --force-reinstall --no-deps "$wheel"
}

case "$ggml_flavor" in
  auto)
    chain=(native wheel)
    has_vulkan_gpu && chain=(vulkan "${chain[@]}")
    has_cuda_gpu && chain=(cuda "${chain[@]}") ;;
  native) chain=(native wheel) ;;
  vulkan|cuda|wheel) chain=("$ggml_flavor") ;;   # asked for by name: a failure is an error
  *) echo "KAZEIA_GGML=$ggml_flavor: choose auto, native, vulkan, cuda or wheel" >&2; exit 2 ;;
esac
stamp="$venv/.kazeia-ggml"
installed="$(cat "$stamp" 2>/dev/null || true)"
# (auto keeps a GPU build already installed for this CPU: it contains the native CPU backend too)
if [[ "$ggml_flavor" == auto && "$installed" =~ ^(vulkan|cuda)- ]] \
   && [[ "$installed" == "$(build_key "${installed%%-*}")" ]]; then
  chain=("${installed%%-*}")
fi
for flavor in "${chain[@]}"; do
  key="$(build_key "$flavor")"
  # already in the venv, and really that build (a venv labelled by an older setup.sh may not be)
  [[ "$installed" == "$key" ]] && venv_has_backend "$flavor" && break
  if install_ggml "$flavor"; then
    venv_has_backend "$flavor" || { echo "ggml '$flavor' installed without its backend library" >&2; exit 1; }
    echo "$key" > "$stamp"
    break
  fi
  echo "ggml build '$flavor' failed" >&2
  [[ "$flavor" == "${chain[-1]}" ]] && exit 1
done
echo "ggml: $(cut -d- -f1 "$stamp") build (KAZEIA_GGML=$ggml_flavor)"

# --- Kazeia ---------------------------------------------------------------------------------
log "installing kazeia$extras"
# Built in the venv, not in an isolated one: against the ggml just installed (the same release as
# pyproject's build requirement), and with the headers' paths inside this clone, so ccache (above)
# finds the objects of another clone's build. The other build requirements come from pyproject.toml.
# (Python 3.10 has no tomllib: an isolated build there, without ccache's hits across clones)
build_requires="$("$venv/bin/python" - <<'PY' 2>/dev/null
import tomllib
for r in tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]:
    if not r.startswith("libggml-python"):   # (installed above: the build this machine uses)
        print(r)
PY
)" || build_requires=""
if [[ -n "$build_requires" ]]; then
  mapfile -t build_requires <<< "$build_requires"
  met "${build_requires[@]}" || "${pip[@]}" "${build_requires[@]}"
  if met --project "$extras"; then   # (every dependency is there: Kazeia alone is built and installed)
    "${pip[@]}" --no-build-isolation --no-deps ".$extras"
  else
    "${pip[@]}" --no-build-isolation ".$extras"
  fi
else
  "${pip[@]}" ".$extras"
fi
"$venv/bin/python" -c "import kazeia._native, kazeia.engine, kazeia.app" || {
  echo "kazeia does not import after installation" >&2; exit 1; }
echo "kazeia is ready in $venv"
