#!/bin/sh
# install_test.sh BUILD_DIR VERSION - installs the build into a fresh prefix, then builds and runs
# a small C program against the installed library twice: with pkg-config and with CMake's
# find_package(grove). Also runs the installed tool. CPU backend only (no GPU needed).
set -eu
build=$1
version=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

fail() {
    echo "install_test: $*" >&2
    exit 1
}

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
libdir=$(dirname "$(find "$prefix" -name grove.pc)")/..

mkdir -p "$tmp/app"
cat >"$tmp/app/app.c" <<'APP'
#include <grove/grove.h>
#include <grove/quadtree.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    grove_ctx_opts o;
    grove_ctx *ctx = NULL;
    grove_quadtree *t = NULL;
    float xy[2 * 1000];
    grove_points p = {xy, 1000, 2};
    unsigned s = 12345u;
    if (argc != 2 || strcmp(grove_version(), argv[1]) != 0) {
        fprintf(stderr, "version %s, want %s\n", grove_version(), argc > 1 ? argv[1] : "?");
        return 1;
    }
    for (int i = 0; i < 2000; i++) {
        s = s * 1103515245u + 12345u;
        xy[i] = (float)(s >> 8) / 16777216.0f;
    }
    grove_ctx_default_opts(&o);
    o.backend = GROVE_BACKEND_CPU;
    if (grove_ctx_create(&o, &ctx) != GROVE_OK || grove_quadtree_build(ctx, &p, NULL, &t) != GROVE_OK) {
        fprintf(stderr, "%s\n", grove_ctx_last_error(ctx));
        return 1;
    }
    /* 1000 uniform points and at most 16 a leaf: the root must have split */
    if (grove_quadtree_num_nodes(t) < 5) {
        fprintf(stderr, "%zu nodes\n", grove_quadtree_num_nodes(t));
        return 1;
    }
    grove_quadtree_destroy(t);
    grove_ctx_destroy(ctx);
    puts("ok");
    return 0;
}
APP

# pkg-config
PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --exists grove || fail "pkg-config does not find grove"
# shellcheck disable=SC2046
cc -std=c11 -o "$tmp/app/app_pc" "$tmp/app/app.c" \
    $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs grove) ||
    fail "cannot build against the installed library with pkg-config"
[ "$("$tmp/app/app_pc" "$version")" = ok ] || fail "the pkg-config build does not run"

# CMake
cat >"$tmp/app/CMakeLists.txt" <<'APP'
cmake_minimum_required(VERSION 3.24)
project(grove_app LANGUAGES C)
find_package(grove REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE grove::grove)
APP
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cmake.log" 2>&1 &&
    cmake --build "$tmp/app/build" >>"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log" >&2; fail "cannot build against the installed library with CMake"; }
[ "$("$tmp/app/build/app" "$version")" = ok ] || fail "the CMake build does not run"

# the tool
"$prefix/bin/grove" --version | grep -q "$version" || fail "the installed grove tool does not run"
echo "install_test: ok ($prefix)"
