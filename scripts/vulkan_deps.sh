#!/usr/bin/env bash
# What ggml's Vulkan backend needs on Debian/Ubuntu, printed as shell assignments to eval:
#
#   eval "$(bash scripts/vulkan_deps.sh build)"      # glslc, SPIR-V and Vulkan headers -> KAZEIA_VULKAN_INCLUDE
#   eval "$(bash scripts/vulkan_deps.sh lavapipe)"   # Mesa's software Vulkan GPU for tests -> VK_ICD_FILENAMES,
#                                                    #   GGML_VK_VISIBLE_DEVICES=0, MESA_SHADER_CACHE_DIR
#
# Debian 12 is too old in two places, both fixed without touching the system's apt sources:
# - its Vulkan-Hpp headers (1.3.239) lack vk::LayerSettingEXT, which ggml-vulkan 0.20 uses: Debian
#   13's libvulkan-dev is unpacked into the cache and only its headers are used for the build;
# - its Mesa 22.3 lavapipe corrupts the heap on ggml's permuted matrix products: bookworm-backports'
#   Mesa 25 lavapipe is unpacked into the cache and named by its own ICD file.
# Newer systems (Debian 13, Ubuntu 24.04) use their own packages. Messages go to stderr.
set -euo pipefail

what="${1:?usage: vulkan_deps.sh build|lavapipe}"
cache="${KAZEIA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kazeia}/vulkan"
multiarch="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"

say() { echo "vulkan_deps: $*" >&2; }

apt_install() {   # only what is missing
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  say "installing Debian packages: ${missing[*]}"
  local sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
}

version_of() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true; }
older_than() { dpkg --compare-versions "$1" lt "$2"; }

# Downloads package/suite into $cache/<package>-<suite> (unpacked) with a private apt configuration:
# the mirror the system already uses, the suite asked for, nothing installed.
unpack_from() {
  local package="$1" suite="$2" dest="$cache/$1-$2"
  [[ -f "$dest/.done" ]] && { echo "$dest"; return; }
  local mirror
  mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | grep -v '^[[:space:]]*#' \
            | grep -oE 'https?://[^ ]*debian[^ ]*' | grep -v security | head -1)"
  mirror="${mirror:-http://deb.debian.org/debian}"
  local apt_dir="$cache/apt"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$dest"
  echo "deb $mirror $suite main" > "$apt_dir/$suite.list"
  local opts=(-o "Dir::Etc::sourcelist=$apt_dir/$suite.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$apt_dir/lists"
              -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
  say "fetching $package from $suite ($mirror)"
  apt-get "${opts[@]}" update -qq >&2
  (cd "$apt_dir" && rm -f "${package}"_*.deb && apt-get "${opts[@]}" download "$package/$suite" >&2)
  dpkg -x "$apt_dir/${package}"_*.deb "$dest"
  touch "$dest/.done"
  echo "$dest"
}

case "$what" in
  build)
    apt_install glslc libvulkan-dev spirv-headers
    if older_than "$(version_of libvulkan-dev)" 1.3.272; then
      headers="$(unpack_from libvulkan-dev trixie)/usr/include"
      say "system Vulkan headers $(version_of libvulkan-dev) < 1.3.272: building with Debian 13's ($headers)"
      echo "export KAZEIA_VULKAN_INCLUDE='$headers'"
    else
      echo "export KAZEIA_VULKAN_INCLUDE=''"
    fi
    ;;
  lavapipe)
    apt_install libvulkan1 mesa-vulkan-drivers
    mkdir -p "$cache/shaders"
    if older_than "$(version_of mesa-vulkan-drivers)" 23; then
      mesa="$(unpack_from mesa-vulkan-drivers bookworm-backports)"
      lib="$mesa/usr/lib/$multiarch/libvulkan_lvp.so"
      [[ -f "$lib" ]] || { say "no lavapipe in $mesa"; exit 1; }
      icd="$cache/lvp_icd.json"
      sed -E "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$lib\"#" \
        "$mesa/usr/share/vulkan/icd.d/lvp_icd.json" > "$icd"
      say "system Mesa $(version_of mesa-vulkan-drivers) < 23 (its lavapipe corrupts ggml's permuted products): using backports' ($lib)"
    else
      icd="$(ls /usr/share/vulkan/icd.d/lvp_icd*.json 2>/dev/null | head -1)"
      [[ -n "$icd" ]] || { say "mesa-vulkan-drivers has no lavapipe ICD file"; exit 1; }
    fi
    echo "export VK_ICD_FILENAMES='$icd' GGML_VK_VISIBLE_DEVICES=0 MESA_SHADER_CACHE_DIR='$cache/shaders'"
    echo "export MESA_SHADER_CACHE_MAX_SIZE=1G"
    ;;
  *) say "unknown request '$what' (build or lavapipe)"; exit 2 ;;
esac
