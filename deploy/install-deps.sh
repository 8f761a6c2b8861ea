#!/usr/bin/env bash
# Installs what kvferry needs to build and test, from Debian's packages only.
# Idempotent: packages already present are left alone, and apt is not touched
# at all when nothing is missing. Run as root (or with sudo available).
set -euo pipefail

packages=(
  g++ cmake make            # toolchain (g++ only: Debian's libcaf is GCC-built)
  lld                       # the linker: links the test executables in a third of ld.bfd's time
  libcaf-dev                # C++ Actor Framework 0.17: core, io, openssl
  libssl-dev                # caf/openssl headers include OpenSSL's; libcrypto: data-plane HMAC
  openssl                   # deploy/make-certs.sh (and its test)
  procps                    # pgrep: the hostile test finds the node processes
  catch2                    # Catch2 v2
  libspdlog-dev libfmt-dev  # logging
  libxxhash-dev             # XXH3: end-to-end KV checksums
  libibverbs-dev librdmacm-dev  # the verbs backend (built where found, runs where a device is)
  iproute2                  # ip netns, for multi-host tests
  ucx-utils                 # ucx_perftest, beside kvferry-bench transports (optional there)
  gnuplot-nox               # docs/transports.png (optional: the bench and tests run without)
  libtomlplusplus-dev       # toml++: kvferry-launch reads cluster files
  libcpp-httplib-dev pkg-config  # cpp-httplib: each node's /metrics (found with pkg-config)
  tmux                      # the test of kvferry-ctl top in a terminal
  libyaml-cpp-dev           # yaml-cpp: the test that parses deploy/k8s
  python3-dev pybind11-dev  # the Python package (apps/python)
  python3-numpy python3-pytest  # its tests
  python3-venv python3-setuptools python3-wheel python3-pip  # pip install apps/python, make sglang-check
)

# --fuzz (make fuzz): AFL++ as well, with its gcc compilers; only when asked.
if [ "${1:-}" = "--fuzz" ]; then
  packages+=(afl++)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
  else
    echo "install-deps: missing ${missing[*]}; run this script as root" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
