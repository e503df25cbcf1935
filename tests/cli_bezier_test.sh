#!/bin/sh
# tests/cli_bezier_test.sh - `grove bezier`: exit codes, messages, outputs, and vertex counts
# worked out by hand from the rules in docs/bezier.md.
# Usage: GROVE=path/to/grove sh tests/cli_bezier_test.sh   (CTest runs it as `cli_bezier`)
set -u

suite=cli_bezier_test
# shellcheck source=tests/cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"

# run WANT_RC NAME ARGS...: expect for grove ARGS.
run() {
    want_rc=$1
    run_name=$2
    shift 2
    expect "$want_rc" "$run_name" "$GROVE" "$@"
}
absent() { [ ! -e "$1" ] || fail "$1 exists (a failed run must not write it)"; }
# rows FILE N: the CSV has the header and N data rows
rows() {
    [ "$(head -n 1 "$1")" = "curve,vertex,x,y" ] || fail "$1: header is not curve,vertex,x,y"
    got=$(($(wc -l <"$1") - 1))
    [ "$got" -eq "$2" ] || fail "$1: $got rows, expected $2"
}

# A line (0,0)-(3,0), the quadratic (0,0) (1,1) (2,0) and the cubic (0,0) (0,10) (10,10) (10,0).
# Curvature rule, defaults (scale 16, 4..32): c = 0, 1 and 10: 4, 16 and 32 vertices.
# Tolerance 0.01: 2; M = 2, 2*1*2/(8 s^2) <= 0.01 from s = 8: 9; M = sqrt(200),
# 3*2*M/(8 s^2) <= 0.01 from s = 33: 34, capped at 32.
cat >"$tmp/three.txt" <<'EOF'
# three curves
0 0 3 0
0,0, 1,1, 2,0

0 0 0 10 10 10 10 0   # a cubic
EOF
cat >"$tmp/three.svg" <<'EOF'
<svg xmlns="http://www.w3.org/2000/svg">
  <g transform="translate(0 0)"><path id="p" d="M0 0 h3 M0 0 q1 1 2 0 M0 0 C0 10 10 10 10 0"/></g>
</svg>
EOF

# ---- help ----
for args in "bezier --help" "bezier -h" "--backend cpu bezier --help"; do
    # shellcheck disable=SC2086
    if run 0 "grove $args" $args; then
        out_has "usage: grove bezier IN"
        out_has "exit codes"
        err_empty
    fi
done

# ---- usage errors: exit 1, message on stderr, nothing on stdout, no output file ----
o="$tmp/u.csv"
for args in "bezier" "bezier $tmp/three.txt" "bezier $tmp/three.txt -o" \
    "bezier $tmp/three.txt -o $o --mode fast" "bezier $tmp/three.txt -o $o --max-points 1" \
    "bezier $tmp/three.txt -o $o --max-points 4097" "bezier $tmp/three.txt -o $o --max-points x" \
    "bezier $tmp/three.txt -o $o --min-points 10 --max-points 5" \
    "bezier $tmp/three.txt -o $o --tolerance 0" "bezier $tmp/three.txt -o $o --tolerance -1" \
    "bezier $tmp/three.txt -o $o --tolerance nan" "bezier $tmp/three.txt -o $o --scale 0" \
    "bezier $tmp/three.txt -o $o --variant gpu" "bezier $tmp/three.txt -o $o --format xml" \
    "bezier $tmp/three.txt -o $o --mode curvature --tolerance 0.1" \
    "bezier $tmp/three.txt -o $o --mode tolerance --min-points 3" \
    "bezier $tmp/three.txt -o $o --tolerance 0.1 --scale 3" \
    "bezier $tmp/three.txt -o $o --svg $o" "bezier $tmp/three.txt -o $o --frobnicate" \
    "bezier $tmp/three.txt $tmp/three.svg -o $o" "bezier $tmp/three.txt -o $o --backend gpu"; do
    # shellcheck disable=SC2086
    if run 1 "grove $args" $args; then
        err_has "^grove: bezier: "
        out_empty
        absent "$o"
    fi
done
run 1 "no input" bezier -o "$o" && err_has "no input file given"
run 1 "no output" bezier "$tmp/three.txt" && err_has "-o OUT.csv or --svg FILE is required"
run 1 "min > max" bezier "$tmp/three.txt" -o "$o" --min-points 10 --max-points 5 &&
    err_has "--min-points 10 is more than --max-points 5"
run 1 "bad mode" bezier "$tmp/three.txt" -o "$o" --mode fast && err_has "curvature|tolerance"

# ---- bad input: exit 2, the reader's message naming file and line ----
printf '0 0 1 1\n1 2 3 4 5\n' >"$tmp/five.txt"
if run 2 "five numbers" bezier "$tmp/five.txt" -o "$o"; then
    err_has "five.txt:2: 5 numbers; a curve is 4 (a line), 6 (a quadratic) or 8 (a cubic)"
    out_empty
fi
printf '0 0 1 1\n0 0 1 zz\n' >"$tmp/word.txt"
run 2 "not a number" bezier "$tmp/word.txt" -o "$o" && err_has "word.txt:2: number 4 is not a number: 'zz'"
printf '0 0 1 nan\n' >"$tmp/nan.txt"
run 2 "NaN" bezier "$tmp/nan.txt" -o "$o" && err_has "nan.txt:1: number 4 is NaN"
printf '<svg>\n<path d="M0 0 L1 1"/>\n<path id="arc" d="M0 0 A5 5 0 2 1 9 9"/>\n</svg>\n' \
    >"$tmp/badarc.svg"
if run 2 "bad arc flag" bezier "$tmp/badarc.svg" -o "$o"; then
    err_has "badarc.svg:3: path 1 (id \"arc\"): 'A' large-arc-flag must be 0 or 1, not '2'"
    err_has "not '2' (character 13 of d)"
fi
run 2 "SVG read as text" bezier "$tmp/badarc.svg" --format text -o "$o" && err_has "looks like SVG"
run 2 "missing file" bezier "$tmp/none.txt" -o "$o" && err_has "none.txt: cannot open"
if [ "$have_python" -eq 1 ]; then
    python3 -c 'import sys; open(sys.argv[1], "w").write("1 " * 600000 + "\n")' "$tmp/long.txt"
    run 2 "line over 1 MiB" bezier "$tmp/long.txt" -o "$o" && err_has "long.txt:1: line is longer"
fi
absent "$o"

# ---- an output that cannot be written: exit 3 before any work ----
run 3 "unwritable output" bezier "$tmp/three.txt" -o "$tmp/no/such/dir/out.csv"
run 3 "unwritable svg" bezier "$tmp/three.txt" --svg "$tmp/no/such/dir/out.svg"

# ---- results ----
if run 0 "curvature defaults" bezier "$tmp/three.txt" -o "$tmp/c.csv" --backend cpu; then
    rows "$tmp/c.csv" 52
    out_has "3 curves (1 lines, 1 quadratics, 1 cubics)"
    out_has "vertices: 52 (per curve: min 4, max 32"
    out_has "wrote $tmp/c.csv"
    grep -q '^0,3,3,0$' "$tmp/c.csv" || fail "the line does not end at (3,0)"
    grep -q '^1,15,2,0$' "$tmp/c.csv" || fail "the quadratic does not end at (2,0) as vertex 15"
    grep -q '^2,0,0,0$' "$tmp/c.csv" || fail "the cubic does not start at (0,0)"
    grep -q '^2,31,10,0$' "$tmp/c.csv" || fail "the cubic does not end at (10,0) as vertex 31"
fi
run 0 "--max-points 8" bezier "$tmp/three.txt" -o "$tmp/m8.csv" --max-points 8 --backend cpu &&
    rows "$tmp/m8.csv" 20
run 0 "--min-points 2 --scale 2" bezier "$tmp/three.txt" -o "$tmp/s2.csv" --min-points 2 \
    --scale 2 --backend cpu && rows "$tmp/s2.csv" 24
if run 0 "tolerance" bezier "$tmp/three.txt" -o "$tmp/t.csv" --tolerance 0.01 --json --backend cpu; then
    rows "$tmp/t.csv" 43
    cp "$tmp/out" "$tmp/t.json"
    json_check "$tmp/t.json" "d['curves'] == 3 and d['vertices'] == 43 and d['mode'] == 'tolerance'"
    json_check "$tmp/t.json" "d['vertices_min'] == 2 and d['vertices_max'] == 32 and d['capped'] == 1"
    json_check "$tmp/t.json" "d['variant'] == 'flat' and d['child_launches'] == 0"
    json_check "$tmp/t.json" "d['output'].endswith('t.csv') and d['svg'] is None"
fi
# the same curves from SVG path data give the same CSV, byte for byte
if run 0 "SVG input" bezier "$tmp/three.svg" -o "$tmp/t2.csv" --mode tolerance --backend cpu; then
    cmp -s "$tmp/t.csv" "$tmp/t2.csv" || fail "SVG and text input give different CSV"
fi
# an SVG input's picture is mirrored to y up: the quadratic's apex (1,1 in the file, y down)
# lies below its chord in the picture's pixel rows, not above
if run 0 "SVG input, --svg" bezier "$tmp/three.svg" --svg "$tmp/p2.svg" --control-polygons \
    --backend cpu; then
    [ "$(tail -n 1 "$tmp/p2.svg")" = "</svg>" ] || fail "p2.svg is incomplete"
    # the first control polygon is the quadratic's: x0,y0 x1,y1 x2,y2 in pixels
    pts=$(awk '/stroke-dasharray/ { g = 1; next } g && /<polyline/ { print; exit }' "$tmp/p2.svg" |
        sed 's/.*points="\([^"]*\)".*/\1/' | tr ',' ' ')
    # shellcheck disable=SC2086
    echo $pts | awk '{ exit !($4 > $2 && $4 > $6) }' || fail "p2.svg: the SVG input is not upright ($pts)"
fi
# arcs become cubics of at most 90 degrees: a full circle of radius 5 about (5,0) drawn as two
# half circles is 4 cubics; each quarter needs more than 8 vertices for tolerance 0.01, so
# --max-points 8 gives 4 * 8 + 2 rows; the ends are the path's points exactly
printf '<svg><path d="M0 0 A5 5 0 1 1 10 0 a5 5 0 0 1 -10 0 L0 3"/></svg>\n' >"$tmp/circle.svg"
if run 0 "arcs" bezier "$tmp/circle.svg" -o "$tmp/arc.csv" --tolerance 0.01 --max-points 8 \
    --backend cpu; then
    out_has "5 curves (1 lines, 0 quadratics, 4 cubics)"
    rows "$tmp/arc.csv" 34
    grep -q '^0,0,0,0$' "$tmp/arc.csv" || fail "the circle does not start at (0,0)"
    grep -q '^1,7,10,0$' "$tmp/arc.csv" || fail "the first half circle does not end at (10,0)"
    grep -q '^3,7,0,0$' "$tmp/arc.csv" || fail "the circle does not close at (0,0)"
    grep -q '^4,1,0,3$' "$tmp/arc.csv" || fail "the line after the arcs does not end at (0,3)"
fi
# basic shapes: a circle is 4 quarter arcs from (cx + r, cy); a rectangle 4 lines; a negative
# size is an error naming the element
printf '<svg><circle cx="5" cy="0" r="5"/><rect x="1" y="2" width="3" height="4"/></svg>\n' \
    >"$tmp/shapes.svg"
if run 0 "basic shapes" bezier "$tmp/shapes.svg" -o "$tmp/shapes.csv" --max-points 8 --backend cpu; then
    out_has "8 curves (4 lines, 0 quadratics, 4 cubics)"
    grep -q '^0,0,10,0$' "$tmp/shapes.csv" || fail "the circle does not start at (10,0)"
    grep -q '^3,7,10,0$' "$tmp/shapes.csv" || fail "the circle does not close at (10,0)"
    grep -q '^4,0,1,2$' "$tmp/shapes.csv" || fail "the rectangle does not start at (1,2)"
fi
printf '<svg>\n<rect id="r" width="-2" height="1"/></svg>\n' >"$tmp/badrect.svg"
run 2 "negative width" bezier "$tmp/badrect.svg" -o "$o" &&
    err_has "badrect.svg:2: rect 0 (id \"r\"): width must not be negative (-2)"
cp "$tmp/three.svg" "$tmp/three-svg.data"
run 0 "--format svg" bezier "$tmp/three-svg.data" --format svg -o "$tmp/t3.csv" --tolerance 0.01 \
    --backend cpu && rows "$tmp/t3.csv" 43
if run 0 "--svg only" bezier "$tmp/three.txt" --svg "$tmp/p.svg" --control-polygons --backend cpu; then
    [ "$(tail -n 1 "$tmp/p.svg")" = "</svg>" ] || fail "p.svg is incomplete"
    grep -q 'stroke-dasharray' "$tmp/p.svg" || fail "p.svg has no control polygons"
    [ "$(grep -c '<polyline' "$tmp/p.svg")" -eq 5 ] || fail "p.svg: not 3 curves + 2 polygons"
    out_has "wrote $tmp/p.svg"
fi
: >"$tmp/empty.txt"
if run 0 "empty input" bezier "$tmp/empty.txt" -o "$tmp/e.csv" --backend cpu; then
    rows "$tmp/e.csv" 0
    out_has "0 curves"
fi
run 0 "--variant on the CPU" bezier "$tmp/three.txt" -o "$tmp/v.csv" --variant cdp --backend cpu &&
    err_has "note: --variant cdp is for the CUDA backend"

# an existing output is replaced whole, and no temporary file is left
printf 'old\n' >"$tmp/keep.csv"
run 2 "failed run keeps the old file" bezier "$tmp/five.txt" -o "$tmp/keep.csv"
[ "$(cat "$tmp/keep.csv")" = "old" ] || fail "keep.csv was changed by a failed run"
# a picture path that is a directory is refused before anything is written
mkdir -p "$tmp/adir"
run 3 "--svg names a directory" bezier "$tmp/three.txt" -o "$tmp/keep.csv" --svg "$tmp/adir" &&
    err_has "adir' is a directory, not a file name"
[ "$(cat "$tmp/keep.csv")" = "old" ] || fail "keep.csv was changed by a run refused for its --svg"
run 3 "-o names a directory" bezier "$tmp/three.txt" -o "$tmp/adir" &&
    err_has "adir' is a directory, not a file name"
# the writers' temporary files are OUT.tmp.XXXXXX
leftovers=$(find "$tmp" -name '*.tmp.*' | wc -l)
[ "$leftovers" -eq 0 ] || fail "temporary files left: $(find "$tmp" -name '*.tmp.*')"
printf '0 0 1 1 2 0\n' >"$tmp/textlike.svg"
run 2 "text curves in an .svg file" bezier "$tmp/textlike.svg" -o "$tmp/tl.csv" &&
    err_has "textlike.svg: not an SVG document: no <svg> element"

# ---- CUDA: the same CSV as the CPU where a GPU is usable; exit 3 with a reason where not ----
"$GROVE" info --backend cuda >/dev/null 2>&1 && gpu=1 || gpu=0
if [ "$gpu" -eq 1 ]; then
    for v in auto cdp flat; do
        run 0 "cuda --variant $v" bezier "$tmp/three.txt" -o "$tmp/g.csv" --tolerance 0.01 \
            --variant $v --backend cuda && { cmp -s "$tmp/t.csv" "$tmp/g.csv" ||
            fail "cuda --variant $v differs from the CPU"; }
    done
else
    run 3 "cuda without a GPU" bezier "$tmp/three.txt" -o "$tmp/g.csv" --backend cuda &&
        err_has "cannot use the cuda backend"
fi

finish
