#!/usr/bin/env bash
# Sets up Kazeia in ./.venv on Debian/Ubuntu: system packages if missing, ggml rebuilt for this CPU
# (falls back to the prebuilt wheel), then the package itself with `pip install .`.
#
#   bash scripts/setup.sh [--test]        --test also installs the test dependencies
#
# KAZEIA_GGML=wheel skips the native ggml rebuild; PYTHON picks the interpreter (3.10+).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python="${PYTHON:-python3}"
venv="${KAZEIA_VENV:-.venv}"
ggml_version="0.20.2.post1"
ggml_flavor="${KAZEIA_GGML:-native}"
extras=""
[[ "${1:-}" == "--test" ]] && extras="[test]"

log() { printf '\n== %s\n' "$*"; }

# --- system packages (only what is missing) -------------------------------------------
missing=()
deb_packages=(libportaudio2 fonts-dejavu-core libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3)   # workbench
[[ -n "$extras" ]] && deb_packages+=(xvfb xauth libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxkbcommon-x11-0)
if command -v dpkg-query >/dev/null; then
  for p in "${deb_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
fi
command -v g++ >/dev/null || missing+=(g++ make)
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

# --- virtual environment ----------------------------------------------------------------
if [[ ! -x "$venv/bin/python" ]]; then
  log "creating $venv ($("$python" --version))"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --disable-pip-version-check -q)
"${pip[@]}" --upgrade "pip>=24"

# --- ggml: rebuilt from its sdist with native CPU flags (2-3.5x faster matrix-matrix work) --
stamp="$venv/.kazeia-ggml"
want="$ggml_flavor-$ggml_version"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  if [[ "$ggml_flavor" == native ]]; then
    log "building ggml $ggml_version for this CPU (GGML_NATIVE, llamafile kernels; ~2 min)"
    if "${pip[@]}" --force-reinstall --no-deps --no-binary libggml-python "libggml-python==$ggml_version" \
         -C cmake.define.GGML_NATIVE=ON -C cmake.define.GGML_LLAMAFILE=ON; then
      echo "$want" > "$stamp"
    else
      echo "native ggml build failed: using the prebuilt wheel (slower prefill and vocoder)" >&2
      "${pip[@]}" --force-reinstall --no-deps "libggml-python==$ggml_version"
      echo "wheel-$ggml_version" > "$stamp"
    fi
  else
    log "installing the prebuilt ggml $ggml_version wheel"
    "${pip[@]}" --force-reinstall --no-deps "libggml-python==$ggml_version"
    echo "$want" > "$stamp"
  fi
fi

# --- Kazeia ---------------------------------------------------------------------------------
log "installing kazeia$extras"
"${pip[@]}" ".$extras"
"$venv/bin/python" -c "import kazeia._native, kazeia.engine, kazeia.app" || {
  echo "kazeia does not import after installation" >&2; exit 1; }
echo "kazeia is ready in $venv"
