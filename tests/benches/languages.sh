#!/usr/bin/env bash
# The same plugin in Rust, Python and JavaScript (`toolwright new NAME --lang L`: a tool counting the lines, words
# and bytes of a file), side by side in one run: build time, component size, first load (compile and describe,
# empty cache), cached load, and one call. Figures go to docs/performance.md ("Plugins in three languages").
#
#   cargo build --release -p toolwright-cli && bash tests/benches/languages.sh [target/release/toolwright]
#
# Needs what the tests need: cargo with wasm32-wasip2, python3 (componentize-py from PyPI), node and npm
# (componentize-js from npm). Rust builds in a fresh target directory, so its time includes the SDK's
# dependencies; the others install their tool first, untimed.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
toolwright="$(realpath "${1:-$root/target/release/toolwright}")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

ms() { echo $(( $(date +%s%N) / 1000000 )); }
load_ms() { "$toolwright" check "$1" --json --cache-dir "$2" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["loadMs"]))'; }

printf '| language | build | size | first load | cached load | one call (durationMs) |\n|---|---|---|---|---|---|\n'
for lang in rust python js; do
  name="bench-$lang"
  "$toolwright" new "$name" --lang "$lang" --dir "$work" --sdk "$root/sdk" > /dev/null
  cd "$work/$name"
  # The build tools, installed untimed (the first ./build.sh of a Python or JS project does this itself).
  case "$lang" in
    python) python3 -m venv .venv && .venv/bin/pip install --quiet --disable-pip-version-check componentize-py==0.25.1 ;;
    js) npm install --no-audit --no-fund --loglevel=error > /dev/null ;;
  esac
  start=$(ms)
  CARGO_TARGET_DIR="$work/target-$lang" ./build.sh > /dev/null 2>&1
  build=$(( $(ms) - start ))
  wasm="$(ls ./*.wasm)"
  size=$(wc -c < "$wasm")
  first=$(load_ms "$wasm" "$work/cache-$lang")
  cached=$(load_ms "$wasm" "$work/cache-$lang")
  call=$("$toolwright" exec calls.json --json --plugins . --no-default-plugins --cache-dir "$work/cache-$lang" \
    | python3 -c 'import json,sys
for l in sys.stdin:
    e = json.loads(l)
    if e["type"] == "tool_execution_end" and e["toolCallId"] == "1": print(e.get("durationMs"))')
  printf '| %s | %s s | %s KiB | %s ms | %s ms | %s ms |\n' "$lang" "$(awk "BEGIN {printf \"%.1f\", $build / 1000}")" \
    $(( size / 1024 )) "$first" "$cached" "$call"
  cd "$work"
done
