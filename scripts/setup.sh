#!/usr/bin/env bash
# Prepares a fresh Debian machine to build and test rowshard. Idempotent: a second run does nothing.
#
# 1. System packages: LLVM 22 (for the CubeCL `cpu` runtime), Mesa lavapipe (the `wgpu` runtime on
#    the CPU), Open MPI and libclang (feature `mpi`). Installed only when missing, and only as root.
# 2. The offline LLVM path: cubecl's `cpu`/`cuda` runtimes depend on `tracel-llvm-bundler`, whose
#    build script downloads LLVM 23.1 from GitHub. Where GitHub is unreachable we install, in the
#    directory that build script looks in, an `llvm-config` that forwards to Debian's LLVM 22 and a
#    sentinel file that makes the build script skip the download. Where the download works (or a
#    real bundle is already there) this step does nothing.
set -euo pipefail

packages=(llvm-22-dev libpolly-22-dev zlib1g-dev libzstd-dev libxml2-dev libz3-dev
          mesa-vulkan-drivers libvulkan1 libopenmpi-dev openmpi-bin libclang-dev pkg-config)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "rowshard setup: missing packages: ${missing[*]}; install them as root (apt-get install)" >&2
    exit 1
  fi
  echo "rowshard setup: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Must match tracel-llvm-bundler's `llvm_path()`: dirs::data_local_dir()/tracel/tracel-llvm-<ver>.
bundle="${XDG_DATA_HOME:-$HOME/.local/share}/tracel/tracel-llvm-23.1.0-4"
sentinel="$bundle/.tracel-llvm-installed"
if [[ -e "$sentinel" ]]; then
  exit 0
fi
if [[ "${ROWSHARD_FORCE_OFFLINE_LLVM:-0}" != 1 ]] &&
   curl -fsS --max-time 5 -o /dev/null -I https://github.com/tracel-ai/tracel-llvm/releases 2>/dev/null; then
  echo "rowshard setup: GitHub is reachable; cubecl will download its own LLVM" >&2
  exit 0
fi

llvm_config=/usr/lib/llvm-22/bin/llvm-config
[[ -x "$llvm_config" ]] || { echo "rowshard setup: $llvm_config not found" >&2; exit 1; }
mkdir -p "$bundle/bin"
# llvm-config prints some system libraries as absolute .so paths, which the bundler turns into
# `-l libz3`; rewrite them into `-lz3`.
cat >"$bundle/bin/llvm-config" <<SHIM
#!/usr/bin/env bash
# rowshard offline LLVM shim: forwards to Debian's LLVM 22 (see scripts/setup.sh).
out=\$($llvm_config "\$@") || exit \$?
printf '%s\n' "\$out" | sed -E 's#(^| )/[^ ]*/lib([^ /]+)\.so([.0-9]*)#\1-l\2#g'
SHIM
chmod +x "$bundle/bin/llvm-config"
touch "$sentinel"
echo "rowshard setup: offline LLVM shim installed at $bundle (LLVM $("$llvm_config" --version))" >&2
