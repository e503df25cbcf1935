#!/bin/sh
# tests/cli_test.sh - checks the `grove` tool's exit codes, messages and outputs.
# Usage: GROVE=path/to/grove sh tests/cli_test.sh   (CTest runs it as the `cli` test)
#
# Adapts to the machine: with a usable GPU, --backend cuda must work; without one it must fail
# with exit 3 and say why. JSON is validated with python3 when it is installed.
set -u

if [ -z "${GROVE:-}" ] || [ ! -x "$GROVE" ]; then
    echo "cli_test: set GROVE to the grove binary (got '${GROVE:-}')" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/grove-cli-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

fails=0
checks=0
name=""

have_python=0
if command -v python3 >/dev/null 2>&1; then have_python=1; fi

fail() {
    fails=$((fails + 1))
    echo "FAIL: $name: $*" >&2
    if [ -s "$tmp/err" ]; then sed -n '1,5s/^/    stderr: /p' "$tmp/err" >&2; fi
}

# expect WANT_RC NAME CMD...: runs CMD with stdout and stderr in $tmp/out and $tmp/err.
expect() {
    want=$1
    name=$2
    shift 2
    checks=$((checks + 1))
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "exit status $rc, expected $want"
        return 1
    fi
    return 0
}

out_has() { grep -q -e "$1" "$tmp/out" || fail "stdout lacks '$1'"; }
err_has() { grep -q -e "$1" "$tmp/err" || fail "stderr lacks '$1'"; }
out_empty() { [ ! -s "$tmp/out" ] || fail "stdout is not empty"; }
err_empty() { [ ! -s "$tmp/err" ] || fail "stderr is not empty"; }

json_valid() {
    [ "$have_python" -eq 1 ] || return 0
    python3 -m json.tool "$1" >/dev/null 2>"$tmp/json_err" ||
        fail "$1 is not valid JSON: $(head -c 200 "$tmp/json_err")"
}

# json_check FILE PYTHON-EXPRESSION: the expression over `d` (the parsed file) must be true.
json_check() {
    [ "$have_python" -eq 1 ] || return 0
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null || fail "$1: not true: $2"
}

# ---- help on every level: usage on stdout, exit 0 ----
for args in "--help" "-h" "info --help" "demo --help" "demo -h" "bench --help" \
    "bench prim --help" "--backend cpu demo --help"; do
    # shellcheck disable=SC2086 # word splitting of $args is intended
    if expect 0 "grove $args" "$GROVE" $args; then
        out_has "usage: grove"
        err_empty
    fi
done

expect 0 "grove --version" "$GROVE" --version && out_has "^grove [0-9][0-9]*\.[0-9][0-9]*\.[0-9]"
version=$(sed -n 's/^grove //p' "$tmp/out")

# ---- usage errors: message and usage on stderr, nothing on stdout, exit 1 ----
if expect 1 "grove (no command)" "$GROVE"; then err_has "no command"; out_empty; fi
if expect 1 "unknown command" "$GROVE" frobnicate; then
    err_has "grove: unknown command 'frobnicate'"
    err_has "usage:"
    out_empty
fi
if expect 1 "unknown global option" "$GROVE" --frobnicate info; then
    err_has "unknown option '--frobnicate'"
    out_empty
fi
for args in "info --frobnicate" "demo --frobnicate" "bench prim --frobnicate" "demo extra" \
    "bench" "bench frobnicate" "demo --size" "demo --size abc" "demo --size -5" \
    "demo --size 99999999999" "demo --backend gpu" "--backend gpu info" "bench prim --repeats 0" \
    "info --json=yes" "--version=2"; do
    # shellcheck disable=SC2086
    if expect 1 "grove $args" "$GROVE" $args; then
        err_has "^grove: "
        out_empty
    fi
done

# ---- info ----
if expect 0 "grove info" "$GROVE" info; then
    out_has "^grove $version"
    out_has "^backends compiled in: cpu"
    out_has "^GPUs: "
    out_has "resolves to: "
    err_empty
fi
gpus=0
cuda_compiled=0
if expect 0 "grove info --json" "$GROVE" info --json; then
    cp "$tmp/out" "$tmp/info.json"
    json_valid "$tmp/info.json"
    json_check "$tmp/info.json" "d['version'] == '$version' and 'cpu' in d['backends']"
    json_check "$tmp/info.json" "len(d['devices']) == d['device_count']"
    json_check "$tmp/info.json" "d['backend'] in ('cpu', 'cuda')"
    json_check "$tmp/info.json" "d['requested_backend'] == 'auto'"
    gpus=$(sed -n 's/.*"device_count": *\([0-9][0-9]*\).*/\1/p' "$tmp/info.json")
    grep -q '"cuda_compiled": true' "$tmp/info.json" && cuda_compiled=1
fi
[ -n "$gpus" ] || gpus=0
echo "cli_test: cuda compiled in: $cuda_compiled, GPUs: $gpus"

if expect 0 "grove info --backend cpu" "$GROVE" info --backend cpu; then
    out_has "resolves to: cpu"
fi

# ---- the CUDA backend: works with a GPU, clean exit 3 without ----
if [ "$gpus" -gt 0 ]; then
    expect 0 "info --backend cuda (GPU present)" "$GROVE" info --backend cuda &&
        out_has "resolves to: cuda"
    expect 0 "demo --backend cuda (GPU present)" "$GROVE" demo --backend cuda --size 100000 &&
        out_has "cuda"
else
    for args in "info --backend cuda" "demo --backend cuda --size 1000" \
        "--backend cuda demo --size 1000" "bench prim --backend cuda --size 1000"; do
        # shellcheck disable=SC2086
        if expect 3 "grove $args (no GPU)" "$GROVE" $args; then
            err_has "cannot use the cuda backend"
            out_empty
        fi
    done
fi

# ---- demo ----
out="$tmp/results/nested"
if expect 0 "demo --size 100000 --out DIR" "$GROVE" demo --size 100000 --out "$out"; then
    out_has "^step "
    out_has "^scan .* OK$"
    out_has "^sort pairs .* OK$"
    out_has "^all .* OK"
    if grep -q "FAILED" "$tmp/out"; then fail "a step FAILED"; fi
    if [ -f "$out/demo.json" ]; then
        json_valid "$out/demo.json"
        json_check "$out/demo.json" "d['ok'] is True and d['n'] == 100000 and len(d['rows']) >= 11"
        json_check "$out/demo.json" "all(r['check'] == 'OK' for r in d['rows'])"
        json_check "$out/demo.json" "all(r['n'] == 100000 for r in d['rows'])"
    else
        fail "$out/demo.json was not written"
    fi
    leftovers=$(find "$out" -name '*.tmp.*' | wc -l)
    [ "$leftovers" -eq 0 ] || fail "temporary files left in $out"
fi

expect 0 "demo --backend cpu --size 0" "$GROVE" demo --backend cpu --size 0 && out_has "^all .* OK"
expect 0 "demo --backend cpu --size 33 --seed 7" "$GROVE" demo --backend cpu --size 33 --seed 7

# An output directory that cannot be created (a regular file is in the way): fails before
# any work, writes nothing.
: >"$tmp/plainfile"
if expect 3 "demo --out <regular file>" "$GROVE" demo --size 1000 --out "$tmp/plainfile"; then
    err_has "cannot create directory"
fi
if [ ! -f "$tmp/plainfile" ] || [ -s "$tmp/plainfile" ]; then
    fail "the regular file was changed"
fi

# The final name is taken by a directory: the rename fails after the run, and the temporary
# file must be gone.
mkdir -p "$tmp/blocked/demo.json"
if expect 3 "demo --out DIR with DIR/demo.json a directory" \
    "$GROVE" demo --size 1000 --out "$tmp/blocked"; then
    err_has "demo.json"
fi
leftovers=$(find "$tmp/blocked" -type f | wc -l)
[ "$leftovers" -eq 0 ] || fail "partial files left in $tmp/blocked: $(find "$tmp/blocked" -type f)"

# A read-only directory (only meaningful when not root: root may write anywhere).
if [ "$(id -u)" -ne 0 ]; then
    mkdir -p "$tmp/readonly"
    chmod 555 "$tmp/readonly"
    expect 3 "demo --out <read-only directory>" "$GROVE" demo --size 1000 --out "$tmp/readonly"
    leftovers=$(find "$tmp/readonly" -type f | wc -l)
    [ "$leftovers" -eq 0 ] || fail "files left in the read-only directory"
    chmod 755 "$tmp/readonly"
fi

# ---- bench: tiny sizes, this checks the tool, not the numbers ----
if expect 0 "bench prim --out FILE" "$GROVE" bench prim --backend cpu --size 10000 --repeats 2 \
    --warmup 1 --out "$tmp/bench.json"; then
    out_has "^op  *impl  *n  *ms"
    if [ -f "$tmp/bench.json" ]; then
        json_valid "$tmp/bench.json"
        json_check "$tmp/bench.json" "len(d['rows']) >= 1 and d['backend'] == 'cpu'"
        json_check "$tmp/bench.json" "all(r['checked'] and r['n'] == 10000 for r in d['rows'])"
    else
        fail "$tmp/bench.json was not written"
    fi
fi

if [ "$fails" -ne 0 ]; then
    echo "cli_test: $fails of $checks checks FAILED" >&2
    exit 1
fi
echo "cli_test: all $checks checks passed"
exit 0
