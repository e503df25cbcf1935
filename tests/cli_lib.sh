# tests/cli_lib.sh - the helpers of the command-line tests (cli_test.sh, cli_octree_test.sh,
# cli_bezier_test.sh), sourced by each after it sets `suite` to its own name:
#
#   suite=cli_x_test
#   . "$(dirname "$0")/cli_lib.sh"
#
# Checks $GROVE, makes $tmp (removed at exit), and defines: expect WANT_RC NAME CMD... (runs
# CMD with stdout and stderr in $tmp/out and $tmp/err and checks the exit status), out_has,
# err_has, out_empty, err_empty, json_valid FILE, json_check FILE PYTHON-EXPRESSION and
# finish (prints the count of checks and exits 0 or 1). JSON checks need python3 and are
# skipped without it.

if [ -z "${GROVE:-}" ] || [ ! -x "$GROVE" ]; then
    echo "$suite: set GROVE to the grove binary (got '${GROVE:-}')" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/grove-$suite.XXXXXX") || exit 1
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

finish() {
    if [ "$fails" -ne 0 ]; then
        echo "$suite: $fails of $checks checks FAILED" >&2
        exit 1
    fi
    echo "$suite: all $checks checks passed"
    exit 0
}
