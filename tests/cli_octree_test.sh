#!/bin/sh
# tests/cli_octree_test.sh - checks `grove octree build|query|export`: exit codes, messages,
# --help, and a build -> query -> export pipeline on small generated CSV and PLY clouds, the
# query results compared with a brute force in awk.
# Usage: GROVE=path/to/grove sh tests/cli_octree_test.sh   (CTest runs it as `cli_octree`)
#
# Coordinates are multiples of 1/1024 below 2^7, exact in float and in the decimal text, so
# the brute force reads the same values as grove. JSON is validated with python3 when it is
# installed. Everything runs on the CPU backend.
set -u

suite=cli_octree_test
# shellcheck source=tests/cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"

G="$GROVE"
B="--backend cpu"

# ---- data: 3000 points, half uniform in [0, 64)^3, half in a small dense spot ----
awk 'BEGIN {
    srand(7); print "x,y,z";
    for (i = 0; i < 3000; i++) {
        for (a = 0; a < 3; a++) {
            if (i % 2) v[a] = int(rand() * 65536) / 1024;
            else v[a] = 20 + int(rand() * 512) / 1024;
        }
        printf "%.10f,%.10f,%.10f\n", v[0], v[1], v[2];
    }
}' >"$tmp/pts.csv"
n=3000

# ---- help on every level: usage on stdout, exit 0 ----
for args in "octree --help" "octree -h" "octree build --help" "octree query --help" \
    "octree export --help"; do
    # shellcheck disable=SC2086
    if expect 0 "grove $args" "$G" $args; then
        out_has "usage: grove octree"
        err_empty
    fi
done

# every option the help lists is documented in docs/octree.md, by its name
doc="$(dirname "$0")/../docs/octree.md"
if [ -f "$doc" ]; then
    for verb in build query export; do
        "$G" octree "$verb" --help | sed -n 's/^  \(-[a-z]*, \)*\(--[a-z-]*\).*/\2/p' |
            while read -r opt; do
                grep -q -e "\`$opt" "$doc" || echo "$opt"
            done >"$tmp/undocumented"
        checks=$((checks + 1))
        name="docs/octree.md lists the options of octree $verb"
        [ ! -s "$tmp/undocumented" ] || fail "missing: $(tr '\n' ' ' <"$tmp/undocumented")"
    done
fi

# ---- usage errors: message on stderr, nothing on stdout, exit 1 ----
d="$tmp/d"
for args in "octree" "octree frobnicate" "octree build" "octree build $tmp/pts.csv" \
    "octree build $tmp/pts.csv -o $d --max-points 0" \
    "octree build $tmp/pts.csv -o $d --max-points abc" \
    "octree build $tmp/pts.csv -o $d --lod-grid 3" \
    "octree build $tmp/pts.csv -o $d --lod-grid 2048" \
    "octree build $tmp/pts.csv -o $d --max-depth 31" \
    "octree build $tmp/pts.csv -o $d --batch 0" \
    "octree build $tmp/pts.csv -o $d --backend gpu" \
    "octree build $tmp/pts.csv -o $d --frobnicate" \
    "octree build $tmp/pts.csv $tmp/pts.csv -o $d" \
    "octree query" "octree query $d" "octree query $d --box 1 2 3" \
    "octree query $d --box 0 0 0 1 1 x" "octree query $d --box 0 0 0 1 1 nan" \
    "octree query $d --radius 0 0 0 -1" \
    "octree query $d --box 0 0 0 1 1 1 --radius 0 0 0 1" \
    "octree export" "octree export $d" "octree export $d --level 1" \
    "octree export $d --level -1 -o $tmp/x.ply" "octree export $d --level 1 -o"; do
    # shellcheck disable=SC2086
    if expect 1 "grove $args" "$G" $args; then
        err_has "^grove"
        out_empty
    fi
done
[ ! -e "$d" ] || { name="usage errors"; fail "$d was created by a usage error"; }

# an option out of range for another (the library's check): usage error too, found before the
# input is read (a missing input is not reported) and before the directory is created
if expect 1 "build --max-depth 29 --lod-grid 128" "$G" octree build "$tmp/pts.csv" -o "$d" \
    --max-depth 29 --lod-grid 128 $B; then
    err_has "max_depth"
fi
if expect 1 "build <missing file> --max-depth 25" "$G" octree build "$tmp/missing.csv" \
    -o "$d/sub" --max-depth 25 $B; then
    err_has "max_depth must be 0..23"
    out_empty
fi
[ ! -e "$d" ] || { name="option conflict"; fail "$d was created by a usage error"; }

# ---- bad input: exit 2, the message names the file ----
printf 'x,y,z\n1,2,3\n4,oops,6\n' >"$tmp/bad.csv"
if expect 2 "build <malformed csv>" "$G" octree build "$tmp/bad.csv" -o "$d" $B; then
    err_has "bad.csv:3"
    out_empty
fi
if expect 2 "build <missing file>" "$G" octree build "$tmp/missing.csv" -o "$d" $B; then
    err_has "missing.csv"
fi
# a line over the text reader's 1 MiB limit (a binary file read as text) is bad input too
awk 'BEGIN { for (i = 0; i < 110000; i++) printf "1234567890" }' >"$tmp/long.xyz"
if expect 2 "build <line over 1 MiB>" "$G" octree build "$tmp/long.xyz" -o "$d" $B; then
    err_has "long.xyz:1: line is longer than 1048576 bytes"
    out_empty
fi
printf 'LASF not really compressed' >"$tmp/cloud.laz"
if expect 2 "build <.laz>" "$G" octree build "$tmp/cloud.laz" -o "$d" $B; then
    err_has "not supported"
fi
if expect 2 "query <missing directory>" "$G" octree query "$tmp/nowhere" --box 0 0 0 1 1 1 $B; then
    err_has "grove.octree: cannot open"
fi
if expect 2 "export <missing directory>" "$G" octree export "$tmp/nowhere" --level 1 \
    -o "$tmp/x.ply"; then
    err_has "metadata.json: cannot open"
fi

[ ! -e "$d" ] || { name="bad input"; fail "$d was left behind by a failed build"; }
# directories the build made (parents included) go again; one that existed stays as it was
if expect 2 "build <malformed csv> -o <new nested directory>" "$G" octree build "$tmp/bad.csv" \
    -o "$tmp/new/deep/dir/" $B; then
    [ ! -e "$tmp/new" ] || fail "$tmp/new was left behind"
fi
mkdir "$tmp/old"
: >"$tmp/old/keep"
if expect 2 "build <malformed csv> -o <existing directory>" "$G" octree build "$tmp/bad.csv" \
    -o "$tmp/old" $B; then
    [ -f "$tmp/old/keep" ] || fail "the existing directory lost its file"
fi
if expect 2 "build <malformed csv> -o <new directory in an existing one>" "$G" octree build \
    "$tmp/bad.csv" -o "$tmp/old/sub" $B; then
    [ -d "$tmp/old" ] && [ -f "$tmp/old/keep" ] && [ ! -e "$tmp/old/sub" ] ||
        fail "$tmp/old/sub left behind, or $tmp/old touched"
fi
# '.' and '..' in the path: what was made goes, what existed stays, even where a new directory's
# '..' names an old one (a built tree there, an empty directory)
if expect 0 "build -o <a tree to keep>" "$G" octree build "$tmp/pts.csv" -o "$tmp/tree" $B; then
    if expect 2 "build <malformed csv> -o <new>/../<existing tree>" "$G" octree build \
        "$tmp/bad.csv" -o "$tmp/n1/../tree" $B; then
        [ -f "$tmp/tree/metadata.json" ] && [ -f "$tmp/tree/octree.bin" ] ||
            fail "the existing tree lost its files"
        [ ! -e "$tmp/n1" ] || fail "$tmp/n1 was left behind"
    fi
fi
# bad input that is the whole file's, not a line's: the message names the file
printf 'x,y,z\n-1.7e308,0,0\n1.7e308,0,0\n' >"$tmp/wide.csv"
if expect 2 "build <extent overflowing a double>" "$G" octree build "$tmp/wide.csv" \
    -o "$tmp/wide" $B; then
    err_has "building the tree of $tmp/wide.csv: bad input" && err_has "overflows a double"
    [ ! -e "$tmp/wide" ] || fail "$tmp/wide was left behind"
fi
mkdir "$tmp/empty"
if expect 2 "build <malformed csv> -o <new>/../<existing empty>/<new>" "$G" octree build \
    "$tmp/bad.csv" -o "$tmp/n2/../empty/sub" $B; then
    [ -d "$tmp/empty" ] && [ ! -e "$tmp/empty/sub" ] && [ ! -e "$tmp/n2" ] ||
        fail "$tmp/empty removed, or $tmp/empty/sub or $tmp/n2 left behind"
fi
if expect 2 "build <malformed csv> -o <new>/./<new>/" "$G" octree build "$tmp/bad.csv" \
    -o "$tmp/n3/./sub/" $B; then
    [ ! -e "$tmp/n3" ] || fail "$tmp/n3 was left behind"
fi

# ---- runtime: an output directory that cannot be created ----
: >"$tmp/plainfile"
if expect 3 "build -o <under a regular file>" "$G" octree build "$tmp/pts.csv" \
    -o "$tmp/plainfile/sub" $B; then
    err_has "plainfile"
    out_empty
fi

# ---- build -> query -> export ----
if expect 0 "build" "$G" octree build "$tmp/pts.csv" -o "$d" --max-points 100 --lod-grid 8 \
    --batch 700 $B; then
    out_has "^grove octree build: .*3000 points"
    out_has "^nodes: "
    out_has "points/s"
    for f in metadata.json hierarchy.bin octree.bin grove.octree; do
        [ -s "$d/$f" ] || fail "$d/$f missing"
    done
    json_valid "$d/metadata.json"
    leftovers=$(find "$d" -name '*grove-tmp*' | wc -l)
    [ "$leftovers" -eq 0 ] || fail "temporary files left in $d"
fi
if expect 0 "build --json" "$G" octree build "$tmp/pts.csv" -o "$tmp/dj" --json $B; then
    cp "$tmp/out" "$tmp/build.json"
    json_valid "$tmp/build.json"
    grep -q '"points": 3000' "$tmp/build.json" || fail "build.json lacks the point count"
    err_empty
fi

# brute force: indices inside the box / the sphere, ascending
awk -F, -v x0=19.75 -v y0=20 -v z0=20.125 -v x1=20.25 -v y1=20.375 -v z1=21 'NR > 1 {
    if ($1 >= x0 && $1 <= x1 && $2 >= y0 && $2 <= y1 && $3 >= z0 && $3 <= z1) print NR - 2
}' "$tmp/pts.csv" >"$tmp/box.want"
if expect 0 "query --box" "$G" octree query "$d" --box 19.75 20 20.125 20.25 20.375 21 $B; then
    cmp -s "$tmp/out" "$tmp/box.want" ||
        fail "box result differs from brute force ($(wc -l <"$tmp/out") vs $(wc -l <"$tmp/box.want") lines)"
    [ -s "$tmp/box.want" ] || fail "the box holds no point: the test proves nothing"
fi
awk -F, -v cx=32 -v cy=16 -v cz=40 -v r=12.5 'NR > 1 {
    dx = $1 - cx; dy = $2 - cy; dz = $3 - cz;
    if (dx * dx + dy * dy + dz * dz <= r * r) print NR - 2
}' "$tmp/pts.csv" >"$tmp/radius.want"
if expect 0 "query --radius" "$G" octree query "$d" --radius 32 16 40 12.5 $B; then
    cmp -s "$tmp/out" "$tmp/radius.want" || fail "radius result differs from brute force"
    [ -s "$tmp/radius.want" ] || fail "the sphere holds no point"
fi
if expect 0 "query --box (empty box)" "$G" octree query "$d" --box 5 0 0 4 64 64 $B; then
    out_empty
fi
if expect 0 "query --box (everything)" "$G" octree query "$d" --box -1 -1 -1 65 65 65 $B; then
    [ "$(wc -l <"$tmp/out")" -eq "$n" ] || fail "not every point"
    [ "$(head -n 1 "$tmp/out")" = 0 ] && [ "$(tail -n 1 "$tmp/out")" = $((n - 1)) ] ||
        fail "not 0 .. n-1"
fi

# infinite bounds and an infinite radius (the library takes them); NaN is a usage error
for q in "--box -inf -inf -inf inf inf inf" "--box -Infinity -1 -INF 65 inf 65" \
    "--radius 20 20 20 inf"; do
    # shellcheck disable=SC2086
    if expect 0 "query $q" "$G" octree query "$d" $q $B; then
        [ "$(wc -l <"$tmp/out")" -eq "$n" ] || fail "not every point"
    fi
done
if expect 0 "query --box (infinite, one side)" "$G" octree query "$d" \
    --box 19.75 20 20.125 20.25 20.375 inf $B; then
    awk -F, 'NR > 1 && $1 >= 19.75 && $1 <= 20.25 && $2 >= 20 && $2 <= 20.375 && $3 >= 20.125 {
        print NR - 2 }' "$tmp/pts.csv" >"$tmp/half.want"
    cmp -s "$tmp/out" "$tmp/half.want" || fail "result differs from brute force"
fi
if expect 1 "query --box with NaN" "$G" octree query "$d" --box 0 0 0 1 nan 1 $B; then
    err_has "^grove: octree query: --box: 'nan' is NaN"
    out_empty
fi
for q in "--radius inf 0 0 1" "--radius 0 0 0 -inf" "--box 0 0 0 1 1 1e999"; do
    # shellcheck disable=SC2086
    if expect 1 "query $q" "$G" octree query "$d" $q $B; then
        err_has "^grove: octree query: "
        if grep -q ">= -inf" "$tmp/err"; then fail "odd message: $(cat "$tmp/err")"; fi
    fi
done

# export: every level until the whole cloud
if expect 0 "export --level 0" "$G" octree export "$d" --level 0 -o "$tmp/l0.ply"; then
    out_has "^wrote [0-9]* points of level 0"
    head -c 200 "$tmp/l0.ply" | grep -q "property double x" || fail "l0.ply is not double PLY"
fi
if expect 0 "export --level 1000" "$G" octree export "$d" --level 1000 -o "$tmp/all.ply"; then
    out_has "^wrote $n points of level 1000"
    head -c 300 "$tmp/all.ply" | grep -q "element vertex $n" || fail "all.ply lacks $n vertices"
fi
# the exported cloud builds again, with the same number of points
if expect 0 "build <exported PLY>" "$G" octree build "$tmp/all.ply" -o "$tmp/d2" $B; then
    out_has "$n points"
fi

# ---- a PLY with colour: rgb in the Potree attributes and in the export ----
awk 'BEGIN {
    srand(3); print "ply"; print "format ascii 1.0"; print "element vertex 200";
    print "property float x"; print "property float y"; print "property float z";
    print "property uchar red"; print "property uchar green"; print "property uchar blue";
    print "end_header";
    for (i = 0; i < 200; i++)
        printf "%d %d %d %d %d %d\n", i % 7, i % 11, i % 13, i % 256, (3 * i) % 256, 255;
}' >"$tmp/col.ply"
if expect 0 "build <PLY with colour>" "$G" octree build "$tmp/col.ply" -o "$tmp/dc" \
    --max-points 10 $B; then
    out_has "rgb"
    grep -q '"name": "rgb"' "$tmp/dc/metadata.json" || fail "metadata.json lists no rgb"
    json_valid "$tmp/dc/metadata.json"
fi
if expect 0 "export <colour>" "$G" octree export "$tmp/dc" --level 99 -o "$tmp/c.ply"; then
    head -c 400 "$tmp/c.ply" | grep -q "property ushort red" || fail "c.ply has no colour"
fi

# ---- LAS input (written here with python3; skipped without it) ----
if [ "$have_python" -eq 1 ]; then
    # las_gen OUT N [MINOR [LEGACY_COUNT [COUNT64]]]: LAS 1.MINOR (default 2), point format 2
    # (colour), N records; the header's counts default to N. Point i is (i % 17, i % 13, i % 11)
    # in metres (scale 0.001, offset 100 200 300), intensity 100 i, red (37 i) % 65536, green
    # 256 (i % 256), blue 65535. LAS 1.4 headers add the 64-bit count (legacy count 0 by default).
    las_gen() {
        python3 -c 'import struct, sys
out, n = sys.argv[1], int(sys.argv[2])
minor = int(sys.argv[3]) if len(sys.argv) > 3 else 2
hsize = 375 if minor == 4 else 227
legacy = int(sys.argv[4]) if len(sys.argv) > 4 else (0 if minor == 4 else n)
count64 = int(sys.argv[5]) if len(sys.argv) > 5 else n
sc, of = 0.001, (100.0, 200.0, 300.0)
pts = [(i % 17, i % 13, i % 11) for i in range(n)]
mx = [max([p[a] for p in pts] + [0]) for a in range(3)]
h = struct.pack("<4sHH16sBB32s32sHHHIIBHI5I3d3d6d", b"LASF", 0, 0, bytes(16), 1, minor,
                b"grove test", b"cli_octree_test.sh", 1, 2024, hsize, hsize, 0, 2, 26, legacy,
                legacy, 0, 0, 0, 0, sc, sc, sc, *of, mx[0] + of[0], of[0], mx[1] + of[1], of[1],
                mx[2] + of[2], of[2])
if minor == 4:
    h += struct.pack("<QQIQ15Q", 0, 0, 0, count64, count64, *([0] * 14))
assert len(h) == hsize
body = b"".join(struct.pack("<iiiHBBbBHHHH", int(round(x / sc)), int(round(y / sc)),
                            int(round(z / sc)), (100 * i) % 65536, 0x09, 2, 0, 0, 0,
                            (37 * i) % 65536, 256 * (i % 256), 65535)
                for i, (x, y, z) in enumerate(pts))
open(out, "wb").write(h + body)' "$@"
    }
    las_gen "$tmp/cloud.las" 300
    if expect 0 "build <LAS 1.2 format 2>" "$G" octree build "$tmp/cloud.las" -o "$tmp/dl2" \
        --max-points 20 --json $B; then
        json_check "$tmp/out" 'd["points"] == 300 and d["rgb"] and d["intensity"]'
        json_check "$tmp/dl2/metadata.json" \
            'd["points"] == 300 and {"rgb", "intensity"} <= {a["name"] for a in d["attributes"]}'
    fi
    # every point comes back, and the whole cloud exports with its colour
    if expect 0 "query <LAS tree>" "$G" octree query "$tmp/dl2" --box 99 199 299 118 214 312 $B; then
        [ "$(wc -l <"$tmp/out")" -eq 300 ] || fail "not 300 points"
    fi
    if expect 0 "export <LAS tree>" "$G" octree export "$tmp/dl2" --level 99 -o "$tmp/l.ply"; then
        out_has "^wrote 300 points"
        head -c 400 "$tmp/l.ply" | grep -q "property ushort red" || fail "l.ply has no colour"
    fi

    # damaged LAS files: exit 2, the file named
    head -c $((227 + 26 * 150 + 13)) "$tmp/cloud.las" >"$tmp/trunc.las"
    if expect 2 "build <truncated LAS>" "$G" octree build "$tmp/trunc.las" -o "$tmp/dl3" $B; then
        err_has "trunc.las: point record 150: truncated (file ends at byte $((227 + 26 * 150 + 13)))"
        out_empty
    fi
    las_gen "$tmp/liar.las" 300 2 1000000000
    if expect 2 "build <LAS claiming 10^9 points>" "$G" octree build "$tmp/liar.las" \
        -o "$tmp/dl3" $B; then
        err_has "liar.las: point record 300: truncated .*the header counts 1000000000 points"
        out_empty
    fi
    # a LAS 1.4 64-bit count of 2^62: a damaged file too, not a count too large for memory
    las_gen "$tmp/liar14.las" 300 4 0 4611686018427387904
    if expect 2 "build <LAS 1.4 claiming 2^62 points>" "$G" octree build "$tmp/liar14.las" \
        -o "$tmp/dl3" $B; then
        err_has "liar14.las: point record 300: truncated .*the header counts 4611686018427387904"
        out_empty
    fi
    # the same file with its true count builds
    las_gen "$tmp/good14.las" 300 4
    if expect 0 "build <LAS 1.4 format 2>" "$G" octree build "$tmp/good14.las" -o "$tmp/dl4" $B; then
        out_has "300 points, rgb, intensity"
    fi
    [ ! -e "$tmp/dl3" ] || { name="damaged LAS"; fail "$tmp/dl3 was left behind"; }
else
    echo "$suite: no python3: the LAS builds are not checked"
fi

# ---- a CSV with colour and intensity columns, named by its header ----
awk 'BEGIN {
    srand(5); print "id,X,Y,Z,Intensity,Red,Green,Blue";
    for (i = 0; i < 500; i++)
        printf "%d,%d,%d,%d,%d,%d,%d,%d\n", i, i % 19, i % 23, i % 29, (131 * i) % 65536,
            i % 256, (7 * i) % 256, 255 - i % 256;
}' >"$tmp/col.csv"
if expect 0 "build <CSV with colour>" "$G" octree build "$tmp/col.csv" -o "$tmp/dcsv" \
    --max-points 16 $B; then
    out_has "500 points, rgb, intensity"
    grep -q '"name": "rgb"' "$tmp/dcsv/metadata.json" || fail "metadata.json lists no rgb"
    grep -q '"name": "intensity"' "$tmp/dcsv/metadata.json" || fail "metadata.json lists no intensity"
fi
if expect 0 "export <CSV with colour>" "$G" octree export "$tmp/dcsv" --level 99 \
    -o "$tmp/csvc.ply"; then
    out_has "^wrote 500 points"
    head -c 400 "$tmp/csvc.ply" | grep -q "property ushort red" || fail "csvc.ply has no colour"
    head -c 400 "$tmp/csvc.ply" | grep -q "property ushort intensity" ||
        fail "csvc.ply has no intensity"
    # every exported point with its colour (8 bits scaled by 257) and intensity, as in the CSV
    if [ "$have_python" -eq 1 ]; then
        python3 -c 'import struct, sys
b = open(sys.argv[1], "rb").read()
end = b.index(b"end_header\n") + len(b"end_header\n")
n = int(b[:end].split(b"element vertex ")[1].split()[0])
got = sorted(struct.unpack_from("<3d4H", b, end + 32 * k) for k in range(n))
want = []
for line in open(sys.argv[2]).read().split()[1:]:
    v = [int(f) for f in line.split(",")]
    want.append((float(v[1]), float(v[2]), float(v[3]), 257 * v[5], 257 * v[6], 257 * v[7], v[4]))
sys.exit(0 if got == sorted(want) else 1)' "$tmp/csvc.ply" "$tmp/col.csv" ||
            fail "the exported points, colours or intensities differ from the CSV"
    fi
fi
printf 'x,y,z,r,g,b\n1,2,3,10,20,30\n4,5,6,10,300,30\n' >"$tmp/badcol.csv"
if expect 2 "build <CSV with a colour above 255>" "$G" octree build "$tmp/badcol.csv" \
    -o "$tmp/dbc" $B; then
    err_has "badcol.csv:3: column 5 (green) is not an integer 0..255: '300'"
    out_empty
fi

# ---- damaged files: exit 2 with the file named ----
cp -r "$d" "$tmp/dd"
head -c 100 "$d/grove.octree" >"$tmp/dd/grove.octree"
if expect 2 "query <truncated grove.octree>" "$G" octree query "$tmp/dd" --box 0 0 0 1 1 1 $B; then
    err_has "grove.octree: truncated header"
fi
printf '{"version": "2.0",' >"$tmp/dd/metadata.json"
if expect 2 "export <malformed metadata.json>" "$G" octree export "$tmp/dd" --level 1 \
    -o "$tmp/x.ply"; then
    err_has "metadata.json: line 1: malformed JSON"
fi
[ ! -e "$tmp/x.ply" ] || { name="failed export"; fail "x.ply written by a failed export"; }
# a truncated octree.bin: the message names octree.bin as the short file
rm -rf "$tmp/dd"
cp -r "$d" "$tmp/dd"
head -c $(($(wc -c <"$d/octree.bin") / 2)) "$d/octree.bin" >"$tmp/dd/octree.bin"
if expect 2 "export <truncated octree.bin>" "$G" octree export "$tmp/dd" --level 1 \
    -o "$tmp/x.ply"; then
    err_has "^grove: octree export: $tmp/dd/octree.bin: [0-9]* bytes, but node r[0-7]* ($tmp/dd/hierarchy.bin) needs bytes [0-9]*\.\.[0-9]*$"
    out_empty
fi
[ ! -e "$tmp/x.ply" ] || { name="failed export"; fail "x.ply written by a failed export"; }

# ---- --device-mem-limit ----
if expect 1 "--device-mem-limit 1x" "$G" --device-mem-limit 1x octree build "$tmp/pts.csv" \
    -o "$tmp/dl"; then
    err_has "device-mem-limit: '1x' is not a count"
    out_empty
fi
# on the CPU backend it changes nothing
if expect 0 "--device-mem-limit on the CPU" "$G" --device-mem-limit 1k octree build \
    "$tmp/pts.csv" -o "$tmp/dl" --max-points 100 --lod-grid 8 --batch 700 $B; then
    cmp -s "$tmp/dl/grove.octree" "$d/grove.octree" || fail "the tree differs"
fi
# With a GPU, a limit too small for the build makes it run its later phases (or all of it) on
# the host, with the same files. Without one (or without the CUDA backend) the tool says it
# cannot use the cuda backend (exit 3): the check is skipped.
if "$G" --backend cuda --device-mem-limit 120k octree build "$tmp/pts.csv" -o "$tmp/dg" \
    --max-points 100 --lod-grid 8 --batch 700 >"$tmp/out" 2>"$tmp/err"; then
    checks=$((checks + 1))
    name="--device-mem-limit 120k on the GPU"
    grep -q "^note: " "$tmp/out" || fail "no note of the fallback"
    for f in grove.octree hierarchy.bin octree.bin; do
        cmp -s "$tmp/dg/$f" "$d/$f" || fail "$f differs from the CPU backend's"
    done
elif ! grep -q "cannot use the cuda backend" "$tmp/err"; then
    checks=$((checks + 1))
    name="--device-mem-limit 120k on the GPU"
    fail "failed"
else
    echo "$suite: no GPU: the --device-mem-limit fallback is not checked"
fi

finish
