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
shim_marker="rowshard offline LLVM shim v2"
if [[ -e "$sentinel" ]] && ! grep -qs "rowshard offline LLVM shim" "$bundle/bin/llvm-config"; then
  exit 0 # a real LLVM bundle, downloaded by cubecl's build script: leave it alone
fi
if grep -qs "$shim_marker" "$bundle/bin/llvm-config"; then
  exit 0 # this shim, already installed
fi
if [[ ! -e "$sentinel" && "${ROWSHARD_FORCE_OFFLINE_LLVM:-0}" != 1 ]] &&
   curl -fsS --max-time 5 -o /dev/null -I https://github.com/tracel-ai/tracel-llvm/releases 2>/dev/null; then
  echo "rowshard setup: GitHub is reachable; cubecl will download its own LLVM" >&2
  exit 0
fi

llvm_config=/usr/lib/llvm-22/bin/llvm-config
[[ -x "$llvm_config" ]] || { echo "rowshard setup: $llvm_config not found" >&2; exit 1; }
mkdir -p "$bundle/bin"
# The bundler asks `llvm-config --link-static --libs` and emits every library it gets as a static
# one, so each test binary would carry ~190 MB of LLVM (7.6 GB for a clean build). The shim links
# Debian's shared libLLVM instead: no static libraries, and `-lLLVM-22` among the system
# libraries, which the bundler emits as dynamic ones. Its symbols are versioned (LLVM_22.1), so it
# coexists with the libLLVM-15 that Mesa's lavapipe loads. llvm-config prints some system
# libraries as absolute .so paths, which the bundler would turn into `-l libz3`: rewrite them into
# `-lz3`.
cat >"$bundle/bin/llvm-config" <<SHIM
#!/usr/bin/env bash
# $shim_marker: forwards to Debian's LLVM 22, linked shared (see scripts/setup.sh).
args=()
for a in "\$@"; do
  case \$a in
    --libs) exit 0 ;;
    --system-libs) args+=(--system-libs); printf -- '-lLLVM-22 ' ;;
    --link-static) args+=(--link-shared) ;;
    *) args+=("\$a") ;;
  esac
done
out=\$($llvm_config "\${args[@]}") || exit \$?
printf '%s\n' "\$out" | sed -E 's#(^| )/[^ ]*/lib([^ /]+)\.so([.0-9]*)#\1-l\2#g'
SHIM
chmod +x "$bundle/bin/llvm-config"
touch "$sentinel"
echo "rowshard setup: offline LLVM shim installed at $bundle (LLVM $("$llvm_config" --version), shared)" >&2
