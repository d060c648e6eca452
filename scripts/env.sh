# Environment for rowshard's builds and tests; sourced by the scripts.
# Vulkan's loader and Mesa want a private runtime dir and a cache dir outside $HOME.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/rowshard-xdg-runtime}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
export XDG_CACHE_HOME="${XDG_CACHE_HOME:-/tmp/rowshard-xdg-cache}"
# insta must not write snapshots on its own in CI.
export INSTA_UPDATE="${INSTA_UPDATE:-no}"
