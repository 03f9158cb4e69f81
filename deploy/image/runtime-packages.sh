#!/bin/sh
# Prints the Debian packages that hold the shared libraries the given
# binaries load (one per line, sorted), so the image's run stage installs
# exactly the runtime libraries of what the build stage produced.
# Usage: runtime-packages.sh BINARY...
set -eu
for lib in $(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u); do
  # dpkg knows a library by the path its package installed: try the path ldd
  # printed (/lib/... on a merged-/usr system), then the file it resolves to
  # (Debian's alternatives, e.g. libblas.so.3 -> OpenBLAS).
  for path in "$lib" "$(readlink -f "$lib")" "/usr$lib"; do
    if owner=$(dpkg-query -S "$path" 2>/dev/null); then
      echo "$owner" | head -n1 | cut -d: -f1
      break
    fi
  done
done | sort -u
