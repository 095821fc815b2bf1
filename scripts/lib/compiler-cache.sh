# shellcheck shell=bash
# Compiles through ccache where it is installed (scripts/setup installs it). Its keys take paths
# relative to the checkout, so that another clone of the same commit (CI's, in a folder of its
# own) reuses what this one compiled; a file whose flags name the checkout's absolute path (a
# test's SMOLBOX_BIN_DIR) is compiled again, as it must be. Sourced from the checkout's top:
#   source scripts/lib/compiler-cache.sh
#   cmake -S . -B build "${compiler_launcher[@]}" ...
# shellcheck disable=SC2034 # used by the scripts that source this
compiler_launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
  compiler_launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
