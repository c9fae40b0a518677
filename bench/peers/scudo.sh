#!/usr/bin/env bash
# Prints the path of LLVM's Scudo standalone allocator as an LD_PRELOAD library, from Debian's
# package (libclang-rt-14-dev on Debian 12, which ships libclang_rt.scudo_standalone), which
# scripts/install-deps installs when missing. Its default options (SCUDO_OPTIONS unset).
#   bench/peers/scudo.sh      the path of the library
set -euo pipefail
cd "$(dirname "$0")/../.."
PACKAGE=libclang-rt-14-dev # LLVM 14.0.6, pinned by Debian 12
bash scripts/install-deps "$PACKAGE" >&2
SO=$(dpkg -L "$PACKAGE" | grep '/libclang_rt\.scudo_standalone-x86_64\.so$')
[ -f "$SO" ] || { echo "$PACKAGE ships no libclang_rt.scudo_standalone-x86_64.so" >&2; exit 1; }
echo "$SO"
