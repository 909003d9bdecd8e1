#!/usr/bin/env bash
# What Python's standard library costs in a component: the template plugin (`toolwright new --lang python`, whose
# SDK imports every codec and the modules the app imports inside functions while componentize-py builds), the
# same with `statistics`, `decimal` and `fractions` imported, and with every importable standard library module;
# size and first load (Cranelift compile and describe, empty cache), each ROUNDS times in turn. Figures go to
# docs/performance.md ("Python's standard library in the component").
#
#   bash tests/benches/python_stdlib.sh TW [ROUNDS] [COMPONENTIZE_PY]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
toolwright="$(realpath "$1")"
rounds="${2:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
"$toolwright" new bench-py --lang python --dir "$work" > /dev/null
cp "$root/sdk/python/toolwright_plugin.py" bench-py/
if [ -n "${3:-}" ]; then cpy="$3"; else
  python3 -m venv venv && venv/bin/pip install --quiet --disable-pip-version-check componentize-py==0.25.1
  cpy="$work/venv/bin/componentize-py"
fi
variant() { # NAME LINES-TO-PREPEND-TO-app.py
  cp -r bench-py "v-$1"
  { printf '%s\n' "$2"; cat bench-py/app.py; } > "v-$1/app.py"
  (cd "v-$1" && "$cpy" -d wit -w tool-plugin componentize app -o "$1.wasm" > /dev/null)
}
variant template ""
variant lazy3 "import statistics, decimal, fractions"
variant stdlib 'import sys as _s, importlib as _i
for _n in sorted(_s.stdlib_module_names - {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo"}):
    try:
        _i.import_module(_n)
    except BaseException:
        pass'
printf '| variant | size | first load (ms), each round |\n|---|---|---|\n'
for v in template lazy3 stdlib; do
  loads=""
  for _ in $(seq "$rounds"); do
    rm -rf cache
    loads="$loads $("$toolwright" check "v-$v/$v.wasm" --json --cache-dir cache \
      | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["loadMs"]))')"
  done
  printf '| %s | %s bytes | %s |\n' "$v" "$(wc -c < "v-$v/$v.wasm")" "$loads"
done
