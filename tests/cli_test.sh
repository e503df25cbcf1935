#!/bin/sh
# tests/cli_test.sh - checks the `grove` tool's exit codes, messages and outputs.
# Usage: GROVE=path/to/grove sh tests/cli_test.sh   (CTest runs it as the `cli` test)
#
# Adapts to the machine: with a usable GPU, --backend cuda must work; without one it must fail
# with exit 3 and say why. JSON is validated with python3 when it is installed.
set -u

suite=cli_test
# shellcheck source=tests/cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"

# ---- help on every level: usage on stdout, exit 0 ----
for args in "--help" "-h" "info --help" "demo --help" "demo -h" "bench --help" \
    "bench prim --help" "bench mri --help" "--backend cpu demo --help"; do
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
    out_has "^quadtree build (morton) .* OK$"
    out_has "^quadtree build (recursive) .* OK$"
    out_has "^quadtree box queries .* OK$"
    out_has "^quadtree picture (quadtree.svg) .* OK$"
    out_has "^kdtree build (3-D) .* OK$"
    out_has "^kdtree knn (10^4 queries, k=8) .* OK$"
    out_has "^all .* OK"
    if grep -q "FAILED" "$tmp/out"; then fail "a step FAILED"; fi
    if [ -f "$out/demo.json" ]; then
        json_valid "$out/demo.json"
        json_check "$out/demo.json" "d['ok'] is True and d['n'] == 100000 and len(d['rows']) >= 11"
        json_check "$out/demo.json" "all(r['check'] == 'OK' for r in d['rows'])"
        json_check "$out/demo.json" "all(r['n'] == 100000 for r in d['rows'] if r['module'] not in ('mri', 'bezier', 'octree'))"
    else
        fail "$out/demo.json was not written"
    fi
    if [ -f "$out/quadtree.svg" ]; then
        [ "$(tail -n 1 "$out/quadtree.svg")" = "</svg>" ] || fail "quadtree.svg is incomplete"
    else
        fail "$out/quadtree.svg was not written"
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
# (quadtree.svg, complete, was written before demo.json failed)
leftovers=$(find "$tmp/blocked" -type f ! -name quadtree.svg ! -name mri-recon.png \
    ! -name bezier.svg ! -name bezier-input.svg ! -path '*/octree/*' | wc -l)
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

# ---- quadtree: build, query, knn, svg; answers against brute force over the same file ----
# Coordinates have 3 decimals in [0, 100): distinct decimals are distinct floats there, and
# float rounding keeps their order, so awk's comparisons in double decide every box exactly as
# the float tree does, edges included.
qt="$tmp/qt"
mkdir -p "$qt"
awk 'BEGIN {
    srand(7); print "x,y,label"
    for (i = 0; i < 3000; i++) {
        if (i % 10 == 9) { x = px[int(rand() * i)]; y = py[int(rand() * i)] }   # duplicates
        else if (i % 50 == 7) { x = 25.5; y = sprintf("%.3f", rand() * 100) }  # on a box edge
        else { x = sprintf("%.3f", rand() * 100); y = sprintf("%.3f", rand() * 100) }
        px[i] = x; py[i] = y; printf "%s,%s,p%d\n", x, y, i
    }
}' >"$qt/pts.csv"
# The same points as ASCII PLY.
{
    printf 'ply\nformat ascii 1.0\ncomment grove cli test\nelement vertex 3000\n'
    printf 'property float x\nproperty float y\nproperty uchar k\nend_header\n'
    awk -F, 'NR > 1 { print $1, $2, NR % 256 }' "$qt/pts.csv"
} >"$qt/pts.ply"

# brute XMIN YMIN XMAX YMAX FILE: 0-based indices of the CSV's points inside the box.
brute() {
    awk -F, -v a="$1" -v b="$2" -v c="$3" -v d="$4" \
        'NR > 1 && $1 >= a && $1 <= c && $2 >= b && $2 <= d { print NR - 2 }' "$5"
}

for args in "quadtree --help" "quadtree -h" "quadtree build --help" "quadtree query --help" \
    "quadtree knn -h" "--backend cpu quadtree build --help"; do
    # shellcheck disable=SC2086
    if expect 0 "grove $args" "$GROVE" $args; then
        out_has "usage: grove quadtree"
        err_empty
    fi
done
if expect 0 "grove --help lists quadtree" "$GROVE" --help; then out_has "^  quadtree "; fi

if expect 0 "quadtree build CSV" "$GROVE" quadtree build "$qt/pts.csv" -o "$qt/t.qt" \
    --backend cpu --min-points 8; then
    out_has "3000 points"
    out_has "^nodes: [0-9]* ([0-9]* leaves"
    out_has "depth reached [0-9]"
    out_has "points per leaf: max [0-9]"
    out_has "points/s"
    out_has "^wrote $qt/t.qt"
    err_empty
    head -c 8 "$qt/t.qt" | grep -q "GROVE-QT" || fail "t.qt does not start with the magic"
fi
expect 0 "quadtree build PLY" "$GROVE" quadtree build "$qt/pts.ply" -o "$qt/t_ply.qt" \
    --backend cpu --min-points 8
cmp -s "$qt/t.qt" "$qt/t_ply.qt" || { name="CSV vs PLY"; fail "the trees differ"; }
# recursive == morton: the files differ only in the method field (bytes 40..43)
if expect 0 "quadtree build --method recursive" "$GROVE" quadtree build "$qt/pts.csv" \
    -o "$qt/t_rec.qt" --backend cpu --min-points 8 --method recursive; then
    out_has "method recursive"
    head -c 40 "$qt/t.qt" >"$qt/a.head"
    head -c 40 "$qt/t_rec.qt" >"$qt/b.head"
    tail -c +45 "$qt/t.qt" >"$qt/a.tail"
    tail -c +45 "$qt/t_rec.qt" >"$qt/b.tail"
    if ! cmp -s "$qt/a.head" "$qt/b.head" || ! cmp -s "$qt/a.tail" "$qt/b.tail"; then
        fail "the recursive tree differs from the morton tree"
    fi
fi

# Box queries: from the tree, from the points (built on the fly), against brute force. Boxes
# cover: a middle box, edges on data values (25.5 is an x of 60 points), everything, a
# degenerate line, an inverted box, nothing.
for box in "10 20 40.5 60" "25.5 0 50 50" "0 0 100 100" "-1 -1 1000 1000" "25.5 0 25.5 100" \
    "60 60 50 70" "200 200 300 300" "33.333 12.5 33.334 99"; do
    # shellcheck disable=SC2086
    brute $box "$qt/pts.csv" >"$qt/want"
    # shellcheck disable=SC2086
    if expect 0 "quadtree query TREE --box $box" "$GROVE" quadtree query "$qt/t.qt" --box $box \
        --backend cpu; then
        cmp -s "$tmp/out" "$qt/want" || fail "differs from brute force ($(wc -l <"$qt/want") lines)"
        err_empty
    fi
    # shellcheck disable=SC2086
    if expect 0 "quadtree query POINTS --box $box" "$GROVE" quadtree query "$qt/pts.csv" \
        --box $box --backend cpu --max-depth 5 --min-points 3; then
        cmp -s "$tmp/out" "$qt/want" || fail "differs from brute force"
    fi
done
[ "$(brute 0 0 100 100 "$qt/pts.csv" | wc -l)" -eq 3000 ] || {
    name="brute force"
    fail "the all-covering box does not hold 3000 points"
}
# --box=a,b,c,d, negative bounds, infinite bounds, -o OUT
brute -1000 -1000 50 1000 "$qt/pts.csv" >"$qt/want"
if expect 0 "quadtree query --box=... -o OUT" "$GROVE" quadtree query "$qt/t.qt" \
    --box=-inf,-1000,50,inf -o "$qt/res.txt" --backend cpu; then
    out_empty
    cmp -s "$qt/res.txt" "$qt/want" || fail "OUT differs from brute force"
fi
# several boxes from a file: CSV query,index
printf '# boxes\nxmin,ymin,xmax,ymax\n10 20 40.5 60\n\n25.5, 0, 50, 50\n' >"$qt/boxes.txt"
{
    echo "query,index"
    brute 10 20 40.5 60 "$qt/pts.csv" | sed 's/^/0,/'
    brute 25.5 0 50 50 "$qt/pts.csv" | sed 's/^/1,/'
} >"$qt/want"
if expect 0 "quadtree query --boxes FILE" "$GROVE" quadtree query "$qt/pts.csv" \
    --boxes "$qt/boxes.txt" --backend cpu; then
    cmp -s "$tmp/out" "$qt/want" || fail "differs from brute force"
fi

# kNN on integer coordinates (exact distances, many ties): against a sort by (d2, index).
awk 'BEGIN { srand(11); print "x y"
    for (i = 0; i < 500; i++) printf "%d %d\n", int(rand() * 20), int(rand() * 20) }' \
    >"$qt/grid.txt"
awk 'NR > 1 { dx = $1 - 7; dy = $2 - 9; print dx * dx + dy * dy, NR - 2 }' "$qt/grid.txt" |
    sort -k1,1n -k2,2n | head -n 25 |
    awk 'BEGIN { print "rank,index,distance" }
        { printf "%d,%d,%.9g\n", NR - 1, $2, sqrt($1) }' >"$qt/want"
if expect 0 "quadtree knn --point -k 25" "$GROVE" quadtree knn "$qt/grid.txt" --point 7 9 -k 25 \
    --backend cpu --min-points 4; then
    cmp -s "$tmp/out" "$qt/want" || fail "differs from the brute-force ranking"
fi
if expect 0 "quadtree knn TREE, k > n" "$GROVE" quadtree knn "$qt/t.qt" --point 50 50 -k 5000 \
    --backend cpu; then
    [ "$(wc -l <"$tmp/out")" -eq 3001 ] || fail "expected a header and 3000 rows"
    head -n 1 "$tmp/out" | grep -q "^rank,index,distance$" || fail "no CSV header"
fi

# --json: one valid object with the summary
if expect 0 "quadtree build --json" "$GROVE" quadtree build "$qt/pts.csv" -o "$qt/t_json.qt" \
    --json --backend cpu --min-points 8; then
    cp "$tmp/out" "$qt/build.json"
    json_valid "$qt/build.json"
    json_check "$qt/build.json" "d['points'] == 3000 and d['nodes'] >= 1 and d['leaves'] >= 1"
    json_check "$qt/build.json" "d['max_leaf_points'] <= 8 or d['depth'] == d['max_depth']"
    json_check "$qt/build.json" "d['method'] == 'morton' and d['min_points'] == 8"
    json_check "$qt/build.json" "d['svg'] is None and d['backend'] == 'cpu'"
    cmp -s "$qt/t.qt" "$qt/t_json.qt" || fail "--json changed the tree"
fi
# a given --bbox
if expect 0 "quadtree build --bbox" "$GROVE" quadtree build "$qt/pts.csv" -o "$qt/t_bb.qt" \
    --bbox -10 -10 110 110 --backend cpu; then
    out_has "root box -10 -10 110 110 (given)"
fi
# an empty (header-only) file: a tree with no points, queries print nothing
echo "x,y" >"$qt/empty.csv"
expect 0 "quadtree build (no points)" "$GROVE" quadtree build "$qt/empty.csv" -o "$qt/e.qt" \
    --backend cpu && out_has "0 points"
expect 0 "quadtree query (no points)" "$GROVE" quadtree query "$qt/e.qt" --box 0 0 1 1 \
    --backend cpu && out_empty

# --svg: well-formed, the points and the boxes drawn; -o may then be left out
if expect 0 "quadtree build --svg (no -o)" "$GROVE" quadtree build "$qt/pts.csv" \
    --svg "$qt/t.svg" --backend cpu --min-points 8; then
    out_has "^wrote $qt/t.svg: all 3000 points, all [0-9]* leaf boxes"
    head -n 1 "$qt/t.svg" | grep -q '^<svg ' || fail "t.svg does not start with <svg"
    [ "$(tail -n 1 "$qt/t.svg")" = "</svg>" ] || fail "t.svg does not end with </svg>"
    grep -q "<!-- points: all 3000 -->" "$qt/t.svg" || fail "t.svg lacks the points comment"
    grep -q "<rect " "$qt/t.svg" || fail "t.svg has no boxes"
    if [ "$have_python" -eq 1 ]; then
        python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' \
            "$qt/t.svg" 2>"$tmp/err" || fail "t.svg is not well-formed XML"
    fi
fi
# Above 100000 points the picture holds a deterministic sample, and says so.
awk 'BEGIN { srand(5); print "x,y"; for (i = 0; i < 120000; i++)
    printf "%.4f,%.4f\n", rand() * rand() * 10, rand() * 10 }' >"$qt/big.csv"
if expect 0 "quadtree build --svg (120000 points)" "$GROVE" quadtree build "$qt/big.csv" \
    --svg "$qt/big.svg" --backend cpu; then
    out_has "a sample of 100000 of the 120000 points"
    grep -q "a deterministic sample of 100000 of the 120000 points" "$qt/big.svg" ||
        fail "big.svg does not say it is a sample"
    dots=$(grep -o 'h0' "$qt/big.svg" | wc -l)
    [ "$dots" -eq 100000 ] || fail "big.svg draws $dots points, not 100000"
    [ "$(tail -n 1 "$qt/big.svg")" = "</svg>" ] || fail "big.svg does not end with </svg>"
fi
expect 0 "quadtree build --svg again" "$GROVE" quadtree build "$qt/big.csv" \
    --svg "$qt/big2.svg" --backend cpu --method recursive &&
    { cmp -s "$qt/big.svg" "$qt/big2.svg" || fail "the picture is not deterministic"; }

# bad input: the reader's message with file:line (or record), exit 2
printf 'x,y\n1,2\n3,abc\n4,5\n' >"$qt/bad.csv"
if expect 2 "quadtree build <bad CSV>" "$GROVE" quadtree build "$qt/bad.csv" -o "$qt/bad.qt" \
    --backend cpu; then
    err_has "bad.csv:3: column 2 is not a number: 'abc'"
    out_empty
    [ ! -e "$qt/bad.qt" ] || fail "a tree was written for bad input"
fi
printf 'x,y\n1,2\n3,nan\n' >"$qt/nan.csv"
expect 2 "quadtree query <NaN in CSV>" "$GROVE" quadtree query "$qt/nan.csv" --box 0 0 1 1 \
    --backend cpu && err_has "nan.csv:3: NaN in column 2"
printf 'ply\nformat ascii 1.0\nelement vertex 3\n' >"$qt/bad.ply"
printf 'property float x\nproperty float y\n' >>"$qt/bad.ply"
printf 'end_header\n1 2\n3 inf\n5 6\n' >>"$qt/bad.ply"
expect 2 "quadtree build <bad PLY>" "$GROVE" quadtree build "$qt/bad.ply" -o "$qt/bad.qt" \
    --backend cpu && err_has "bad.ply:8: vertex record 1"
expect 2 "quadtree build <missing file>" "$GROVE" quadtree build "$qt/nope.csv" -o "$qt/bad.qt" \
    --backend cpu && err_has "nope.csv: cannot open"
printf '1 2 3 4\n5 6 x 8\n' >"$qt/badboxes.txt"
expect 2 "quadtree query --boxes <bad file>" "$GROVE" quadtree query "$qt/t.qt" \
    --boxes "$qt/badboxes.txt" --backend cpu && err_has "badboxes.txt:2: column 3 is not a number"
expect 2 "quadtree build --bbox not holding the points" "$GROVE" quadtree build "$qt/pts.csv" \
    -o "$qt/bad.qt" --bbox 0 0 50 50 --backend cpu && err_has "outside"
# a broken tree file: the loader's message, exit 2
head -c 200 "$qt/t.qt" >"$qt/trunc.qt"
expect 2 "quadtree query <truncated tree>" "$GROVE" quadtree query "$qt/trunc.qt" --box 0 0 1 1 \
    --backend cpu && err_has "trunc.qt: truncated"
cp "$qt/pts.csv" "$qt/notatree.qt"
expect 2 "quadtree query <.qt that is not a tree>" "$GROVE" quadtree query "$qt/notatree.qt" \
    --box 0 0 1 1 --backend cpu && err_has "not a grove quadtree file"
{ head -c 64 "$qt/t.qt"; head -c 32 /dev/zero; tail -c +97 "$qt/t.qt"; } >"$qt/zeroed.qt"
expect 2 "quadtree knn <corrupt tree>" "$GROVE" quadtree knn "$qt/zeroed.qt" --point 1 1 \
    --backend cpu && err_has "zeroed.qt: "
[ "$(wc -c <"$qt/zeroed.qt")" -eq "$(wc -c <"$qt/t.qt")" ] || {
    name="corrupt tree"
    fail "the corrupted copy has the wrong length"
}

# usage errors: exit 1, a message, nothing on stdout
for args in "quadtree" "quadtree frobnicate" "quadtree build" "quadtree build @P" \
    "quadtree build @P -o @T --max-depth 31" "quadtree build @P -o @T --max-depth x" \
    "quadtree build @P -o @T --min-points -1" "quadtree build @P -o @T --method fast" \
    "quadtree build @P -o @T --bbox 0 0 1" "quadtree build @P -o @T --bbox 0 0 x 1" \
    "quadtree build @P -o @T --bbox 1 0 0 1" "quadtree build @P -o @T --frobnicate" \
    "quadtree build @P -o @T --backend gpu" "quadtree build @P @P -o @T" \
    "quadtree build @P -o @T --json=1" "quadtree build @P -o" "quadtree build @P -o @T --svg @T" \
    "quadtree query @P" "quadtree query @P --box 1 2 3" "quadtree query @P --box 0 0 nan 1" \
    "quadtree query @P --box 0 0 1 1 --boxes @B" "quadtree query --box 0 0 1 1" \
    "quadtree knn @P" "quadtree knn @P --point 1" "quadtree knn @P --point 1 2 -k 0" \
    "quadtree knn @P --point 1 inf" "quadtree knn @P --point 1 2 -k x"; do
    real=$(echo "$args" | sed "s#@P#$qt/pts.csv#g; s#@T#$qt/u.qt#g; s#@B#$qt/boxes.txt#g")
    # shellcheck disable=SC2086
    if expect 1 "grove $args" "$GROVE" $real; then
        err_has "^grove: "
        out_empty
    fi
done
[ ! -e "$qt/u.qt" ] || { name="usage errors"; fail "a usage error wrote a tree"; }

# unwritable outputs: exit 3, and no file (partial or temporary) left behind
if expect 3 "quadtree build -o <missing directory>" "$GROVE" quadtree build "$qt/pts.csv" \
    -o "$qt/no/such/dir/t.qt" --backend cpu; then
    err_has "no/such/dir/t.qt"
    out_empty
fi
mkdir -p "$qt/blocked/t.qt" "$qt/blocked/res.txt" "$qt/blocked/t.svg"
expect 3 "quadtree build -o <a directory>" "$GROVE" quadtree build "$qt/pts.csv" \
    -o "$qt/blocked/t.qt" --backend cpu
expect 3 "quadtree build --svg <a directory>" "$GROVE" quadtree build "$qt/pts.csv" \
    --svg "$qt/blocked/t.svg" --backend cpu
expect 3 "quadtree query -o <a directory>" "$GROVE" quadtree query "$qt/t.qt" --box 0 0 50 50 \
    -o "$qt/blocked/res.txt" --backend cpu
leftovers=$(find "$qt/blocked" -type f | wc -l)
[ "$leftovers" -eq 0 ] || fail "files left in $qt/blocked: $(find "$qt/blocked" -type f)"
if [ "$(id -u)" -ne 0 ]; then
    mkdir -p "$qt/readonly"
    chmod 555 "$qt/readonly"
    expect 3 "quadtree build -o <read-only directory>" "$GROVE" quadtree build "$qt/pts.csv" \
        -o "$qt/readonly/t.qt" --svg "$qt/readonly/t.svg" --backend cpu
    expect 3 "quadtree query -o <read-only directory>" "$GROVE" quadtree query "$qt/t.qt" \
        --box 0 0 1 1 -o "$qt/readonly/r.txt" --backend cpu
    leftovers=$(find "$qt/readonly" -type f | wc -l)
    [ "$leftovers" -eq 0 ] || fail "files left in the read-only directory"
    chmod 755 "$qt/readonly"
fi
leftovers=$(find "$qt" -name '*.tmp.*' -o -name '*grove-tmp*' | wc -l)
[ "$leftovers" -eq 0 ] || { name="quadtree temporaries"; fail "temporary files left in $qt"; }

# the CUDA backend: the same tree as the CPU's with a GPU, a clean exit 3 without
if [ "$gpus" -gt 0 ]; then
    for m in morton recursive; do
        if expect 0 "quadtree build --backend cuda --method $m" "$GROVE" quadtree build \
            "$qt/pts.csv" -o "$qt/t_cuda_$m.qt" --backend cuda --min-points 8 --method $m; then
            tail -c +45 "$qt/t_cuda_$m.qt" >"$qt/cuda.tail"
            tail -c +45 "$qt/t.qt" | cmp -s - "$qt/cuda.tail" ||
                fail "the CUDA tree differs from the CPU tree"
        fi
    done
    brute 10 20 40.5 60 "$qt/pts.csv" >"$qt/want"
    expect 0 "quadtree query --backend cuda" "$GROVE" quadtree query "$qt/pts.csv" \
        --box 10 20 40.5 60 --backend cuda && { cmp -s "$tmp/out" "$qt/want" ||
        fail "differs from brute force"; }
else
    if expect 3 "quadtree build --backend cuda (no GPU)" "$GROVE" quadtree build \
        "$qt/pts.csv" -o "$qt/c.qt" --backend cuda; then
        err_has "cannot use the cuda backend"
        out_empty
    fi
    [ ! -e "$qt/c.qt" ] || fail "a tree was written"
fi

# ---- k-d tree: build, knn, radius; answers against brute force over the same files ----
# Integer coordinates in a small range: squared distances are small integers (exact in float,
# in double and in awk), and there are many exact ties, which must be ordered by index.
kd="$tmp/kd"
mkdir -p "$kd"
awk 'BEGIN { srand(13); print "x,y,z"
    for (i = 0; i < 400; i++) {
        if (i % 9 == 8) { j = int(rand() * i); x = px[j]; y = py[j]; z = pz[j] }  # duplicates
        else { x = int(rand() * 10); y = int(rand() * 10); z = int(rand() * 10) - 5 }
        px[i] = x; py[i] = y; pz[i] = z; printf "%d,%d,%d\n", x, y, z }
}' >"$kd/pts.csv"
awk 'BEGIN { srand(17); print "x y z"
    for (i = 0; i < 40; i++) printf "%d %d %d\n", int(rand() * 14) - 2, int(rand() * 14) - 2,
        int(rand() * 14) - 7 }' >"$kd/q.txt"
# the same kind of data in 2-D
awk 'BEGIN { srand(19); print "x,y"
    for (i = 0; i < 300; i++) printf "%d,%d\n", int(rand() * 16), int(rand() * 16) }' \
    >"$kd/pts2.csv"
awk 'BEGIN { srand(23); for (i = 0; i < 25; i++) printf "%d,%d\n", int(rand() * 20) - 2,
    int(rand() * 20) - 2 }' >"$kd/q2.csv"

# brute_knn POINTS QUERIES K [R]: the expected CSV; every (query, point) pair sorted by query,
# squared distance, index; the first K of each query (within R when R is given).
brute_knn() {
    {
        echo "query,rank,index,distance"
        awk -F '[ ,]+' -v r="${4:-}" '
            BEGIN { np = 0; nq = 0 }
            FNR == 1 && $1 !~ /^-?[0-9]/ { next }
            NR == FNR { px[np] = $1; py[np] = $2; pz[np] = $3 + 0; np++; next }
            { for (i = 0; i < np; i++) {
                  dx = px[i] - $1; dy = py[i] - $2; dz = pz[i] - ($3 + 0)
                  d = dx * dx + dy * dy + dz * dz
                  if (r == "" || d <= r * r) print nq, d, i }
              nq++ }' "$1" "$2" | sort -k1,1n -k2,2n -k3,3n |
            awk -v k="$3" 'BEGIN { last = -1 } { if ($1 != last) { rank = 0; last = $1 }
                if (rank < k) printf "%d,%d,%d,%.9g\n", $1, rank, $3, sqrt($2); rank++ }'
    }
}

for args in "kdtree --help" "kdtree -h" "kdtree build --help" "--backend cpu kdtree build -h"; do
    # shellcheck disable=SC2086
    if expect 0 "grove $args" "$GROVE" $args; then
        out_has "usage: grove kdtree"
        err_empty
    fi
done
for args in "knn --help" "knn -h" "knn @P @Q -k 3 --help"; do
    real=$(echo "$args" | sed "s#@P#$kd/pts.csv#g; s#@Q#$kd/q.txt#g")
    # shellcheck disable=SC2086
    if expect 0 "grove $args" "$GROVE" $real; then
        out_has "usage: grove knn"
        err_empty
    fi
done
if expect 0 "grove --help lists kdtree and knn" "$GROVE" --help; then
    out_has "^  kdtree "
    out_has "^  knn "
fi

if expect 0 "kdtree build CSV" "$GROVE" kdtree build "$kd/pts.csv" -o "$kd/t.kdt" \
    --backend cpu --leaf-size 4; then
    out_has "400 points, 3-D"
    out_has "^options: leaf_size 4"
    out_has "^nodes: [0-9]* ([0-9]* leaves"
    out_has "depth [0-9]"
    out_has "points/s"
    out_has "^wrote $kd/t.kdt"
    err_empty
    head -c 8 "$kd/t.kdt" | grep -q "GROVE-KD" || fail "t.kdt does not start with the magic"
fi
if expect 0 "kdtree build --json" "$GROVE" kdtree build "$kd/pts.csv" -o "$kd/t_json.kdt" \
    --json --backend cpu --leaf-size 4; then
    cp "$tmp/out" "$kd/build.json"
    json_valid "$kd/build.json"
    json_check "$kd/build.json" "d['points'] == 400 and d['dims'] == 3 and d['leaf_size'] == 4"
    json_check "$kd/build.json" "d['nodes'] >= 1 and d['leaves'] >= 1 and d['depth'] >= 1"
    json_check "$kd/build.json" "d['backend'] == 'cpu' and d['build_ms'] >= 0"
    cmp -s "$kd/t.kdt" "$kd/t_json.kdt" || fail "--json changed the tree"
fi
expect 0 "kdtree build 2-D" "$GROVE" kdtree build "$kd/pts2.csv" -o "$kd/t2.kdt" --backend cpu &&
    out_has "300 points, 2-D"

# kNN: from the tree and from the points (built on the fly, other leaf sizes) against brute
# force; k = 1, 8, 50, and k > n (every point, in order).
for k in 1 8 50 1000; do
    brute_knn "$kd/pts.csv" "$kd/q.txt" $k >"$kd/want"
    if expect 0 "knn TREE -k $k" "$GROVE" knn "$kd/t.kdt" "$kd/q.txt" -k $k --backend cpu; then
        cmp -s "$tmp/out" "$kd/want" || fail "differs from brute force ($(wc -l <"$kd/want") lines)"
        err_empty
    fi
    cp "$tmp/out" "$kd/from_tree"
    if expect 0 "knn POINTS -k $k" "$GROVE" knn "$kd/pts.csv" "$kd/q.txt" -k $k --backend cpu \
        --leaf-size 1; then
        cmp -s "$tmp/out" "$kd/from_tree" || fail "points input differs from tree input"
    fi
done
[ "$(wc -l <"$kd/want")" -eq $((40 * 400 + 1)) ] || { name="brute force"; fail "k > n rows"; }
brute_knn "$kd/pts2.csv" "$kd/q2.csv" 7 >"$kd/want"
if expect 0 "knn 2-D -k 7" "$GROVE" knn "$kd/pts2.csv" "$kd/q2.csv" -k 7 --backend cpu; then
    cmp -s "$tmp/out" "$kd/want" || fail "differs from brute force"
fi
brute_knn "$kd/pts2.csv" "$kd/q2.csv" 7 >"$kd/want"
if expect 0 "knn 2-D TREE -k 7 -o OUT" "$GROVE" knn "$kd/t2.kdt" "$kd/q2.csv" -k 7 \
    -o "$kd/res.csv" --backend cpu; then
    out_empty
    cmp -s "$kd/res.csv" "$kd/want" || fail "OUT differs from brute force"
fi

# Radius: R = 3 lands exactly on distances (d2 = 9 must be included), capped and uncapped;
# R = 0 finds the exact duplicates of the queries.
for rk in "3 1000" "3 5" "2.5 3" "0 1000" "4.75 1"; do
    # shellcheck disable=SC2086 # word splitting of $rk is intended
    set -- $rk
    brute_knn "$kd/pts.csv" "$kd/q.txt" "$2" "$1" >"$kd/want"
    if expect 0 "knn --radius $1 -k $2" "$GROVE" knn "$kd/t.kdt" "$kd/q.txt" --radius "$1" \
        -k "$2" --backend cpu; then
        cmp -s "$tmp/out" "$kd/want" || fail "differs from brute force ($(wc -l <"$kd/want") lines)"
    fi
done
brute_knn "$kd/pts.csv" "$kd/q.txt" 100000 3 >"$kd/want"
if expect 0 "knn --radius 3 (no -k)" "$GROVE" knn "$kd/pts.csv" "$kd/q.txt" --radius 3 \
    --backend cpu; then
    cmp -s "$tmp/out" "$kd/want" || fail "differs from brute force"
fi
# queries on data points: distance 0 rows exist
awk -F, 'NR > 1 && NR % 37 == 0 { print $1, $2, $3 }' "$kd/pts.csv" >"$kd/qd.txt"
brute_knn "$kd/pts.csv" "$kd/qd.txt" 4 >"$kd/want"
if expect 0 "knn queries on data points" "$GROVE" knn "$kd/t.kdt" "$kd/qd.txt" -k 4 \
    --backend cpu; then
    cmp -s "$tmp/out" "$kd/want" || fail "differs from brute force"
    grep -q ',0$' "$tmp/out" || fail "no zero distance"
fi

# no points, or no queries: the header only
echo "x,y,z" >"$kd/empty.csv"
if expect 0 "knn (no points)" "$GROVE" knn "$kd/empty.csv" "$kd/q.txt" -k 3 --backend cpu; then
    [ "$(cat "$tmp/out")" = "query,rank,index,distance" ] || fail "expected the header only"
fi
if expect 0 "knn (no queries)" "$GROVE" knn "$kd/t.kdt" "$kd/empty.csv" -k 3 --backend cpu; then
    [ "$(cat "$tmp/out")" = "query,rank,index,distance" ] || fail "expected the header only"
fi

# bad input: exit 2, the reader's or the loader's message
printf 'x y z\n1 2 3\n4 abc 6\n' >"$kd/badq.txt"
if expect 2 "knn <bad query file>" "$GROVE" knn "$kd/t.kdt" "$kd/badq.txt" -k 2 --backend cpu; then
    err_has "badq.txt:3: column 2 is not a number: 'abc'"
    out_empty
fi
printf 'x,y,z\n1,2,3\n4,5,nan\n' >"$kd/nan.csv"
expect 2 "kdtree build <NaN in CSV>" "$GROVE" kdtree build "$kd/nan.csv" -o "$kd/bad.kdt" \
    --backend cpu && err_has "nan.csv:3: NaN in column 3"
[ ! -e "$kd/bad.kdt" ] || fail "a tree was written for bad input"
expect 2 "knn <bad points file>" "$GROVE" knn "$kd/nan.csv" "$kd/q.txt" -k 2 --backend cpu &&
    err_has "nan.csv:3: NaN in column 3"
expect 2 "knn <missing query file>" "$GROVE" knn "$kd/t.kdt" "$kd/nope.txt" -k 2 --backend cpu &&
    err_has "nope.txt: cannot open"
if expect 2 "knn dims mismatch (2-D queries, 3-D tree)" "$GROVE" knn "$kd/t.kdt" "$kd/q2.csv" \
    -k 2 --backend cpu; then
    err_has "q2.csv: the queries are 2-D but the points of .*t.kdt are 3-D"
    out_empty
fi
expect 2 "knn dims mismatch (3-D queries, 2-D points)" "$GROVE" knn "$kd/pts2.csv" "$kd/q.txt" \
    -k 2 --backend cpu && err_has "3-D but"
head -c 100 "$kd/t.kdt" >"$kd/trunc.kdt"
expect 2 "knn <truncated tree>" "$GROVE" knn "$kd/trunc.kdt" "$kd/q.txt" -k 2 --backend cpu &&
    err_has "trunc.kdt: "
cp "$kd/pts.csv" "$kd/notatree.kdt"
expect 2 "knn <.kdt that is not a tree>" "$GROVE" knn "$kd/notatree.kdt" "$kd/q.txt" -k 2 \
    --backend cpu && err_has "not a grove k-d tree file"
expect 2 "kdtree build <a tree file>" "$GROVE" kdtree build "$kd/t.kdt" -o "$kd/bad.kdt" \
    --backend cpu && err_has "is a saved k-d tree"
expect 2 "knn <tree file as queries>" "$GROVE" knn "$kd/t.kdt" "$kd/t.kdt" -k 2 \
    --backend cpu && err_has "is a saved k-d tree"

# --double: points that differ only beyond float precision (UTM metres, millimetres given; a
# float keeps 0.5 m at 4.5e6). Query 4512345.22 is nearest to 4512345.30 (0.08 m), but in
# float it becomes 4512345.0, exactly on the first point, and the second moves to 4512345.5.
printf 'x,y,z\n4512345.10,5412345.00,100.00\n4512345.30,5412345.00,100.00\n4512346.00,5412345.00,100.00\n' \
    >"$kd/utm.csv"
printf '4512345.22 5412345.00 100.00\n' >"$kd/utmq.txt"
printf 'query,rank,index,distance\n0,0,1,0.0800000001\n0,1,0,0.12\n0,2,2,0.78\n' >"$kd/want_d"
printf 'query,rank,index,distance\n0,0,0,0\n0,1,1,0.5\n0,2,2,1\n' >"$kd/want_f"
if expect 0 "knn --double (UTM)" "$GROVE" knn "$kd/utm.csv" "$kd/utmq.txt" -k 3 --double \
    --backend cpu; then
    cmp -s "$tmp/out" "$kd/want_d" || fail "double neighbours: $(cat "$tmp/out")"
    err_empty
fi
if expect 0 "knn (UTM, float)" "$GROVE" knn "$kd/utm.csv" "$kd/utmq.txt" -k 3 --backend cpu; then
    cmp -s "$tmp/out" "$kd/want_f" || fail "float neighbours: $(cat "$tmp/out")"
fi
if expect 0 "kdtree build --double" "$GROVE" kdtree build "$kd/utm.csv" -o "$kd/utm.kdt" \
    --double --backend cpu; then
    out_has "3 points, 3-D, double, backend cpu"
fi
if expect 0 "knn TREE --double" "$GROVE" knn "$kd/utm.kdt" "$kd/utmq.txt" -k 3 --double \
    --backend cpu; then
    cmp -s "$tmp/out" "$kd/want_d" || fail "double tree: $(cat "$tmp/out")"
fi
if expect 0 "knn --double --radius 0.1" "$GROVE" knn "$kd/utm.csv" "$kd/utmq.txt" --double \
    --radius 0.1 --backend cpu; then
    [ "$(cat "$tmp/out")" = "$(printf 'query,rank,index,distance\n0,0,1,0.0800000001')" ] ||
        fail "radius: $(cat "$tmp/out")"
fi
if expect 0 "kdtree build --double --json" "$GROVE" kdtree build "$kd/utm.csv" \
    -o "$kd/utm_j.kdt" --double --json --backend cpu; then
    cp "$tmp/out" "$kd/utm.json"
    json_valid "$kd/utm.json"
    json_check "$kd/utm.json" "d['coords'] == 'double' and d['points'] == 3"
fi
expect 0 "kdtree build (float) --json" "$GROVE" kdtree build "$kd/utm.csv" -o "$kd/utm_f.kdt" \
    --json --backend cpu && out_has '"coords": "float"'
# 300 random points in a 2 m box at UTM magnitudes, 25 queries: --double against brute force in
# awk (double arithmetic; indices exact, distances to 1e-6), while the float run differs.
awk 'BEGIN { srand(29); print "x,y,z"
    for (i = 0; i < 300; i++) printf "%.3f,%.3f,%.3f\n", 4512345 + 2 * rand(),
        5412345 + 2 * rand(), 100 + 2 * rand() }' >"$kd/utm300.csv"
awk 'BEGIN { srand(31); for (i = 0; i < 25; i++) printf "%.3f %.3f %.3f\n",
    4512345 + 2 * rand(), 5412345 + 2 * rand(), 100 + 2 * rand() }' >"$kd/utm300q.txt"
awk -F '[ ,]+' 'FNR == 1 && $1 !~ /^-?[0-9]/ { next }
    NR == FNR { px[np] = $1; py[np] = $2; pz[np] = $3; np++; next }
    { for (i = 0; i < np; i++) {
          dx = px[i] - $1; dy = py[i] - $2; dz = pz[i] - $3
          printf "%d %.17g %d\n", nq, dx * dx + dy * dy + dz * dz, i }
      nq++ }' "$kd/utm300.csv" "$kd/utm300q.txt" | sort -k1,1n -k2,2g -k3,3n |
    awk 'BEGIN { last = -1 } { if ($1 != last) { rank = 0; last = $1 }
        if (rank < 5) printf "%d,%d,%d,%.17g\n", $1, rank, $3, sqrt($2); rank++ }' \
    >"$kd/utm300.want"
# same_rows GOT WANT: query, rank and index equal, distances within 1e-6 relative
same_rows() {
    awk -F, 'NR == FNR { w[FNR] = $0; n = FNR; next }
        FNR == 1 { next }
        { split(w[FNR - 1], a, ","); if ($1 != a[1] || $2 != a[2] || $3 != a[3]) bad++
          else if ($4 - a[4] > 1e-6 * a[4] || a[4] - $4 > 1e-6 * a[4]) bad++; m = FNR - 1 }
        END { exit (bad == 0 && m == n) ? 0 : 1 }' "$2" "$1"
}
if expect 0 "knn --double (300 UTM points)" "$GROVE" knn "$kd/utm300.csv" "$kd/utm300q.txt" \
    -k 5 --double --backend cpu; then
    same_rows "$tmp/out" "$kd/utm300.want" || fail "differs from brute force in double"
fi
if expect 0 "knn (300 UTM points, float)" "$GROVE" knn "$kd/utm300.csv" "$kd/utm300q.txt" \
    -k 5 --backend cpu; then
    same_rows "$tmp/out" "$kd/utm300.want" && fail "float run matches the double brute force"
fi
printf '1 2 3\n4 5 1e309\n' >"$kd/bigq.txt"
if expect 2 "knn --double <query beyond double range>" "$GROVE" knn "$kd/utm.csv" "$kd/bigq.txt" \
    -k 1 --double --backend cpu; then
    err_has "bigq.txt:2: column 3 is out of double range: '1e309'"
    out_empty
fi
expect 2 "knn --double <tree file as queries>" "$GROVE" knn "$kd/utm.kdt" "$kd/utm.kdt" -k 1 \
    --double --backend cpu && err_has "is a saved k-d tree"
expect 2 "kdtree build --double <missing file>" "$GROVE" kdtree build "$kd/nope.csv" \
    -o "$kd/bad.kdt" --double --backend cpu && err_has "nope.csv: cannot open"
if expect 0 "knn --help mentions --double" "$GROVE" knn --help; then out_has "^  --double"; fi
if expect 0 "kdtree build --help mentions --double" "$GROVE" kdtree build --help; then
    out_has "^  --double"
fi

# usage errors: exit 1, a message, nothing on stdout
for args in "kdtree" "kdtree frobnicate" "kdtree build" "kdtree build @P" \
    "kdtree build @P -o" "kdtree build @P -o @T --leaf-size 0" \
    "kdtree build @P -o @T --leaf-size 65" "kdtree build @P -o @T --leaf-size x" \
    "kdtree build @P @P -o @T" "kdtree build @P -o @T --frobnicate" \
    "kdtree build @P -o @T --backend gpu" "kdtree build @P -o @T --json=1" \
    "knn" "knn @P" "knn @P @Q" "knn @P @Q -k 0" "knn @P @Q -k 1000001" "knn @P @Q -k x" \
    "knn @P @Q -k" "knn @P @Q -k 2 --radius -1" "knn @P @Q -k 2 --radius nan" \
    "knn @P @Q -k 2 --radius inf" "knn @P @Q -k 2 --radius 1e999" "knn @P @Q --radius abc" \
    "knn @P @Q @Q -k 2" "knn @P @Q -k 2 --leaf-size 99" "knn @P @Q -k 2 --backend gpu" \
    "knn @P @Q -k 2 --frobnicate" "knn @P @Q -k 2 -o" "knn @P @Q -k 2 --double=1" \
    "kdtree build @P -o @T --double=yes"; do
    real=$(echo "$args" | sed "s#@P#$kd/pts.csv#g; s#@Q#$kd/q.txt#g; s#@T#$kd/u.kdt#g")
    # shellcheck disable=SC2086
    if expect 1 "grove $args" "$GROVE" $real; then
        err_has "^grove: "
        out_empty
    fi
done
[ ! -e "$kd/u.kdt" ] || { name="kdtree usage errors"; fail "a usage error wrote a tree"; }
# a non-finite radius is refused with a message that says so
if expect 1 "knn --radius inf (message)" "$GROVE" knn "$kd/pts.csv" "$kd/q.txt" --radius inf; then
    err_has "^grove: knn: --radius: 'inf' is infinite, a finite number is needed"
fi
if expect 1 "knn --radius -1 (message)" "$GROVE" knn "$kd/pts.csv" "$kd/q.txt" --radius -1; then
    err_has "^grove: knn: --radius: '-1' is out of range (must be >= 0)"
fi

# unwritable outputs: exit 3, and no file (partial or temporary) left behind
if expect 3 "kdtree build -o <missing directory>" "$GROVE" kdtree build "$kd/pts.csv" \
    -o "$kd/no/such/dir/t.kdt" --backend cpu; then
    err_has "no/such/dir/t.kdt"
    out_empty
fi
if expect 3 "knn -o <missing directory>" "$GROVE" knn "$kd/t.kdt" "$kd/q.txt" -k 2 \
    -o "$kd/no/such/dir/r.csv" --backend cpu; then
    err_has "no/such/dir/r.csv"
    out_empty
fi
mkdir -p "$kd/blocked/t.kdt" "$kd/blocked/r.csv"
expect 3 "kdtree build -o <a directory>" "$GROVE" kdtree build "$kd/pts.csv" \
    -o "$kd/blocked/t.kdt" --backend cpu
expect 3 "knn -o <a directory>" "$GROVE" knn "$kd/pts.csv" "$kd/q.txt" -k 2 \
    -o "$kd/blocked/r.csv" --backend cpu
leftovers=$(find "$kd/blocked" -type f | wc -l)
[ "$leftovers" -eq 0 ] || fail "files left in $kd/blocked: $(find "$kd/blocked" -type f)"
if [ "$(id -u)" -ne 0 ]; then
    mkdir -p "$kd/readonly"
    chmod 555 "$kd/readonly"
    expect 3 "kdtree build -o <read-only directory>" "$GROVE" kdtree build "$kd/pts.csv" \
        -o "$kd/readonly/t.kdt" --backend cpu
    expect 3 "knn -o <read-only directory>" "$GROVE" knn "$kd/t.kdt" "$kd/q.txt" -k 2 \
        -o "$kd/readonly/r.csv" --backend cpu
    leftovers=$(find "$kd/readonly" -type f | wc -l)
    [ "$leftovers" -eq 0 ] || fail "files left in the read-only directory"
    chmod 755 "$kd/readonly"
fi
# a bad query file after -o: exit 2 and no output file
expect 2 "knn <bad query file> -o OUT" "$GROVE" knn "$kd/t.kdt" "$kd/badq.txt" -k 2 \
    -o "$kd/r_bad.csv" --backend cpu
[ ! -e "$kd/r_bad.csv" ] || fail "an output file was left for bad input"
leftovers=$(find "$kd" -name '*.tmp.*' | wc -l)
[ "$leftovers" -eq 0 ] || { name="kdtree temporaries"; fail "temporary files left in $kd"; }

if [ "$gpus" -eq 0 ]; then
    if expect 3 "knn --backend cuda (no GPU)" "$GROVE" knn "$kd/t.kdt" "$kd/q.txt" -k 2 \
        --backend cuda; then
        err_has "cannot use the cuda backend"
        out_empty
    fi
fi

# ==== mri q / mri fhd: Parboil files (section owned by the mri module) ====
# Usage errors exit 1, unreadable or damaged input files exit 2 with the reader's message and no
# output, an unwritable output exits 3; a good run writes the Q / FHD sums, checked against a
# float64 direct sum in Python (float rounding tolerance).
mri="$tmp/mri"
mkdir -p "$mri"
for args in "mri --help" "mri -h" "mri q --help" "mri fhd --help" "mri q -h"; do
    # shellcheck disable=SC2086 # word splitting of $args is intended
    if expect 0 "grove $args" "$GROVE" $args; then
        out_has "usage: grove mri"
        err_empty
    fi
done
if expect 1 "mri (no command)" "$GROVE" mri; then err_has "no command"; out_empty; fi
if expect 1 "mri frobnicate" "$GROVE" mri frobnicate; then err_has "unknown command"; fi
if expect 1 "mri q (no input)" "$GROVE" mri q -o "$mri/o.bin"; then err_has "no input file"; fi
if expect 1 "mri q (no -o)" "$GROVE" mri q "$mri/in_q.bin"; then err_has "-o OUT is required"; fi
if expect 1 "mri q --kernel bogus" "$GROVE" mri q "$mri/in_q.bin" -o "$mri/o.bin" --kernel bogus
then err_has "unknown kernel 'bogus'"; fi
expect 1 "mri q --kernel (no value)" "$GROVE" mri q "$mri/in_q.bin" -o "$mri/o.bin" --kernel
expect 1 "mri q --backend bogus" "$GROVE" mri q "$mri/in_q.bin" -o "$mri/o.bin" --backend bogus
expect 1 "mri q --bogus" "$GROVE" mri q "$mri/in_q.bin" -o "$mri/o.bin" --bogus
expect 1 "mri fhd two inputs" "$GROVE" mri fhd "$mri/a.bin" "$mri/b.bin" -o "$mri/o.bin"
if expect 2 "mri q <missing file>" "$GROVE" mri q "$mri/missing.bin" -o "$mri/o.bin" \
    --backend cpu; then
    err_has "missing.bin"
    out_empty
fi
[ ! -e "$mri/o.bin" ] || { name="mri q <missing file>"; fail "an output file was left"; }

if [ "$have_python" -eq 1 ]; then
    # mri_gen OUT WITH_DATA NUMK NUMX [DAMAGE]: a Parboil file of random values (|k| <= 64,
    # |x| <= 0.5); DAMAGE: "cut" drops the last 6 bytes, "nan" puts a NaN in phiR[3].
    mri_gen() {
        python3 -c 'import random, struct, sys
out, wd, nk, nx = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
damage = sys.argv[5] if len(sys.argv) > 5 else ""
random.seed(nk * 1000 + nx + wd)
u = lambda lo, hi, n: [random.uniform(lo, hi) for _ in range(n)]
arrays = [u(-64, 64, nk) for _ in range(3)] + [u(-0.5, 0.5, nx) for _ in range(3)]
arrays += [u(-1, 1, nk) for _ in range(4 if wd else 2)]
if damage == "nan":
    arrays[6][3] = float("nan")
b = struct.pack("<ii", nk, nx) + b"".join(struct.pack("<%df" % len(a), *a) for a in arrays)
if damage == "cut":
    b = b[:-6]
open(out, "wb").write(b)' "$@"
    }
    # mri_check IN WITH_DATA OUT [TOL]: OUT against a float64 direct sum over IN, relative L2
    # error <= TOL (default 1e-7: the CPU backend's float rounding).
    mri_check() {
        python3 -c 'import math, struct, sys
inp, wd, outp = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-7
b = open(inp, "rb").read()
nk, nx = struct.unpack_from("<ii", b, 0)
off, arr = 8, []
for n in [nk] * 3 + [nx] * 3 + [nk] * (4 if wd else 2):
    arr.append(struct.unpack_from("<%df" % n, b, off))
    off += 4 * n
kx, ky, kz, x, y, z, pr, pi = arr[:8]
o = open(outp, "rb").read()
if len(o) != 4 + 8 * nx or struct.unpack_from("<I", o, 0)[0] != nx:
    sys.exit("bad output file size or count")
re = struct.unpack_from("<%df" % nx, o, 4)
im = struct.unpack_from("<%df" % nx, o, 4 + 4 * nx)
if wd:
    dr, di = arr[8:10]
    wr = [pr[m] * dr[m] + pi[m] * di[m] for m in range(nk)]
    wi = [pr[m] * di[m] - pi[m] * dr[m] for m in range(nk)]
else:
    wr = [pr[m] ** 2 + pi[m] ** 2 for m in range(nk)]
    wi = [0.0] * nk
e2 = r2 = 0.0
for n in range(nx):
    sr = si = 0.0
    for m in range(nk):
        t = kx[m] * x[n] + ky[m] * y[n] + kz[m] * z[n]
        a = 2 * math.pi * (t - round(t))
        c, s = math.cos(a), math.sin(a)
        sr += wr[m] * c - wi[m] * s
        si += wi[m] * c + wr[m] * s
    e2 += (re[n] - sr) ** 2 + (im[n] - si) ** 2
    r2 += sr * sr + si * si
rel = math.sqrt(e2 / r2)
sys.exit(0 if rel <= tol else "relative L2 error %g > %g" % (rel, tol))' "$@" 2>"$tmp/py_err" ||
            fail "$3 against a float64 direct sum: $(cat "$tmp/py_err")"
    }
    mri_gen "$mri/in_q.bin" 0 200 150
    mri_gen "$mri/in_fhd.bin" 1 177 131
    if expect 0 "mri q" "$GROVE" mri q "$mri/in_q.bin" -o "$mri/q.bin" --backend cpu; then
        out_empty
        err_has "numK 200, numX 150, kernel auto, backend cpu"
        err_has "pairs/s"
        mri_check "$mri/in_q.bin" 0 "$mri/q.bin"
    fi
    if expect 0 "mri fhd" "$GROVE" mri fhd "$mri/in_fhd.bin" -o "$mri/fhd.bin" --backend cpu
    then
        out_empty
        err_has "numK 177, numX 131"
        mri_check "$mri/in_fhd.bin" 1 "$mri/fhd.bin"
    fi
    # the global --backend and --output=, and the same bytes again
    if expect 0 "grove --backend cpu mri q --output=" "$GROVE" --backend cpu mri q \
        "$mri/in_q.bin" --output="$mri/q2.bin"; then
        cmp -s "$mri/q.bin" "$mri/q2.bin" || fail "a second run wrote different bytes"
    fi
    # the kernel variants are the CUDA backend's
    if expect 3 "mri q --kernel tiled --backend cpu" "$GROVE" mri q "$mri/in_q.bin" \
        -o "$mri/o.bin" --kernel tiled --backend cpu; then
        err_has "CUDA backend only"
    fi
    # damaged inputs: exit 2, the reader's message, no output
    mri_gen "$mri/cut.bin" 0 20 10 cut
    if expect 2 "mri q <truncated file>" "$GROVE" mri q "$mri/cut.bin" -o "$mri/o.bin" \
        --backend cpu; then
        err_has "cut.bin: truncated: expected 528 bytes for array phiI"
        out_empty
    fi
    mri_gen "$mri/nan.bin" 1 20 10 nan
    if expect 2 "mri fhd <NaN in phiR>" "$GROVE" mri fhd "$mri/nan.bin" -o "$mri/o.bin" \
        --backend cpu; then
        err_has "nan.bin: phiR\[3\] is NaN"
    fi
    if expect 2 "mri fhd <an mri-q file>" "$GROVE" mri fhd "$mri/in_q.bin" -o "$mri/o.bin" \
        --backend cpu; then
        err_has "for array dR"
    fi
    if expect 2 "mri q <an mri-fhd file>" "$GROVE" mri q "$mri/in_fhd.bin" -o "$mri/o.bin" \
        --backend cpu; then
        err_has "bytes after the last array"
    fi
    [ ! -e "$mri/o.bin" ] || { name="mri bad input"; fail "an output file was left"; }
    # unwritable outputs: exit 3 before the work, nothing left behind
    mkdir -p "$mri/blocked/o.bin"
    expect 3 "mri q -o <a directory>" "$GROVE" mri q "$mri/in_q.bin" -o "$mri/blocked/o.bin" \
        --backend cpu
    expect 3 "mri q -o <missing directory>" "$GROVE" mri q "$mri/in_q.bin" \
        -o "$mri/nodir/o.bin" --backend cpu
    leftovers=$(find "$mri/blocked" -type f | wc -l)
    [ "$leftovers" -eq 0 ] || fail "files left in $mri/blocked"
    if [ "$gpus" -eq 0 ]; then
        if expect 3 "mri q --backend cuda (no GPU)" "$GROVE" mri q "$mri/in_q.bin" \
            -o "$mri/o.bin" --backend cuda; then
            err_has "cannot use the cuda backend"
        fi
    else
        for kern in auto scatter gather constant tiled fast; do
            if expect 0 "mri fhd --kernel $kern --backend cuda" "$GROVE" mri fhd \
                "$mri/in_fhd.bin" -o "$mri/g_$kern.bin" --kernel "$kern" --backend cuda; then
                err_has "kernel $kern, backend cuda"
                mri_check "$mri/in_fhd.bin" 1 "$mri/g_$kern.bin" 1e-4
            fi
        done
    fi
    leftovers=$(find "$mri" -name '*grove-tmp*' | wc -l)
    [ "$leftovers" -eq 0 ] || { name="mri temporaries"; fail "temporary files left in $mri"; }
else
    echo "cli_test: python3 not found: the mri file checks are skipped"
fi
# ==== end of the mri section ====

# ---- grove mri phantom / grove mri recon (tools/cmd_mri_recon.c, docs/mri.md) ----
mr="$tmp/mri-recon"
mkdir -p "$mr"
for args in "mri phantom --help" "mri recon --help"; do
    # shellcheck disable=SC2086
    if expect 0 "grove $args" "$GROVE" $args; then
        out_has "usage: grove mri"
        err_empty
    fi
done
for args in "mri phantom" "mri phantom -o @/a.h5 --dim 4" "mri phantom -o @/a.h5 --trajectory stack" \
    "mri phantom -o @/a.h5 --size 7" "mri phantom -o @/a.h5 --trajectory zigzag" \
    "mri phantom -o @/a.h5 --oversampling 0" "mri phantom -o @/a.h5 --frobnicate" \
    "mri phantom -o @/a.h5 --dim 3 --size 999" "mri phantom -o" "mri recon" "mri recon @/p.h5" \
    "mri recon @/p.h5 -o @/r.nii --iters -1" "mri recon @/p.h5 -o @/r.nii --lambda -1" \
    "mri recon @/p.h5 -o @/r.nii --lambda abc" "mri recon @/p.h5 -o @/r.nii --fhf fast" \
    "mri recon @/p.h5 -o @/r.nii --reference brain" "mri recon @/p.h5 @/q.h5 -o @/r.nii" \
    "mri recon @/p.h5 -o @/r.nii --backend gpu" "mri recon @/p.h5 -o @/r.nii --png"; do
    real=$(echo "$args" | sed "s#@#$mr#g")
    # shellcheck disable=SC2086
    if expect 1 "grove $args" "$GROVE" $real; then
        err_has "^grove: "
        out_empty
    fi
done
[ ! -e "$mr/a.h5" ] && [ ! -e "$mr/r.nii" ] || { name="mri usage errors"; fail "a usage error wrote a file"; }

"$GROVE" mri phantom --size 32 -o "$mr/p.h5" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 3 ] && grep -q "cannot write ISMRMRD" "$tmp/err"; then
    echo "cli_test: note: this build has no ISMRMRD support; the mri file checks are skipped"
else
    checks=$((checks + 1))
    name="mri phantom --size 32"
    [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
    out_has " samples in "
    # a small phantom reconstructs: NRMSE measured 0.233 at 20 iterations (docs/mri.md)
    if expect 0 "mri recon (phantom 32, toeplitz)" "$GROVE" mri recon "$mr/p.h5" -o "$mr/r.nii" \
        --png "$mr/png" --iters 20 --reference phantom --backend cpu; then
        out_has "NRMSE against the Shepp-Logan phantom"
        out_has "20 iterations"
        nrmse=$(sed -n 's/^NRMSE against the Shepp-Logan phantom: \([0-9.]*\)$/\1/p' "$tmp/out")
        awk -v v="${nrmse:-9}" 'BEGIN { exit !(v < 0.26) }' ||
            fail "NRMSE '$nrmse' is not below 0.26"
        size=$(wc -c <"$mr/r.nii" | tr -d ' ')
        [ "$size" -eq 4448 ] || fail "r.nii has $size bytes, expected 352 + 4 * 32 * 32 = 4448"
        magic=$(dd if="$mr/r.nii" bs=1 skip=344 count=3 2>/dev/null)
        [ "$magic" = "n+1" ] || fail "r.nii: magic '$magic', expected n+1"
        sig=$(dd if="$mr/png/slice-0000.png" bs=1 skip=1 count=3 2>/dev/null)
        [ "$sig" = "PNG" ] || fail "slice-0000.png does not start with the PNG signature"
    fi
    if expect 0 "mri recon --json (exact, lambda)" "$GROVE" mri recon "$mr/p.h5" \
        -o "$mr/r2.nii" --fhf exact --iters 4 --lambda 0.05 --json --reference phantom \
        --backend cpu; then
        cp "$tmp/out" "$mr/r2.json"
        json_valid "$mr/r2.json"
        json_check "$mr/r2.json" 'd["iterations"] == 4 and d["fhf"] == "exact" and 0 < d["nrmse"] < 0.5 and d["residual"] < 1'
    fi
    if expect 0 "mri phantom 3-D stack" "$GROVE" mri phantom --dim 3 --size 8 \
        --trajectory stack -o "$mr/p3.h5" --image "$mr/p3.nii"; then
        size=$(wc -c <"$mr/p3.nii" | tr -d ' ')
        [ "$size" -eq 2400 ] || fail "p3.nii has $size bytes, expected 352 + 4 * 8^3 = 2400"
        if expect 0 "mri recon 3-D" "$GROVE" mri recon "$mr/p3.h5" -o "$mr/r3.nii" \
            --png "$mr/png3" --iters 10 --backend cpu; then
            n=$(find "$mr/png3" -name 'slice-*.png' | wc -l | tr -d ' ')
            [ "$n" -eq 8 ] || fail "$n PNG slices, expected 8"
        fi
    fi
    # bad files: exit 2, the message names the file, no output left behind
    printf 'this is not HDF5\n' >"$mr/junk.h5"
    head -c 3000 "$mr/p.h5" >"$mr/cut.h5"
    for bad in junk.h5 cut.h5 missing.h5; do
        if expect 2 "mri recon <$bad>" "$GROVE" mri recon "$mr/$bad" -o "$mr/bad.nii" \
            --backend cpu; then
            err_has "$bad"
            out_empty
        fi
    done
    [ ! -e "$mr/bad.nii" ] || { name="mri bad input"; fail "an output was written for bad input"; }
    # unwritable output: exit 3 before any work
    if expect 3 "mri recon -o <missing directory>" "$GROVE" mri recon "$mr/p.h5" \
        -o "$mr/no/such/dir/r.nii" --backend cpu; then
        err_has "no/such/dir/r.nii"
        out_empty
    fi
    expect 3 "mri phantom -o <missing directory>" "$GROVE" mri phantom -o "$mr/no/such/p.h5"
    leftovers=$(find "$mr" -name '*grove-tmp*' -o -name '*.tmp.*' | wc -l | tr -d ' ')
    [ "$leftovers" -eq 0 ] || { name="mri temporaries"; fail "temporary files left in $mr"; }
    if [ "$gpus" -eq 0 ]; then
        expect 3 "mri recon --backend cuda (no GPU)" "$GROVE" mri recon "$mr/p.h5" \
            -o "$mr/r4.nii" --backend cuda
    fi
fi

finish
