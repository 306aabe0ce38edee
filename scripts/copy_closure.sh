#!/usr/bin/env bash
# Copies files and the shared libraries they load into a root folder, so that a container stage
# gets what the binaries need and nothing that a package manager would drag in beside it.
#
#   scripts/copy_closure.sh [--prune NAME]... [--base FILE] [--record FILE] ROOT FILE...
#
#   ROOT           the folder that becomes the image's / (COPY ROOT/ /); made if missing
#   FILE           an executable or library; copied to ROOT at its own path, with the closure of
#                  libraries the dynamic loader resolves for it (ldd)
#   --prune NAME   in the copy of each library whose file name starts with NAME
#                  (libtorch_cpu.so), drop each direct dependency that the loader binds no
#                  symbol to (`ldd -u`), and with it that dependency's own closure
#   --base FILE    the packages (one name per line) of the image ROOT is copied onto: their
#                  files are there already and are not copied, nor followed further
#   --record FILE  write each copied file with its Debian package and version to FILE ("PATH
#                  PACKAGE VERSION", "PATH -" for files of no package), and copy those
#                  packages' copyright files (/usr/share/doc/PKG/copyright) into ROOT
#
# Paths are copied with their folders resolved (merged /usr: /lib/x86_64-linux-gnu/libc.so.6
# lands in /usr/lib/x86_64-linux-gnu/), so that a copy never replaces a folder link of the base
# it is copied onto. A library reached through symbolic links (libblas.so.3 through
# /etc/alternatives to OpenBLAS) keeps each link of the chain, so that the loader finds it by
# the name the binaries ask for and `readlink -f` shows what it is.
#
# Why --prune: Debian's libtorch_cpu.so is linked without --as-needed and lists OpenCV and
# FFmpeg among its dependencies, whose closure (Qt, GDAL, codecs; ~290 MB) no symbol of libtorch
# binds to. A library whose dependency is dropped this way loads and runs exactly as before: the
# loader had resolved nothing from it. Only the libraries named are pruned, since an unused
# dependency can still matter through its initialisers.
#
# Needs ldd, readelf, patchelf (--prune), dpkg-query (--record). Exits 1 with one line naming
# what is missing or unresolved.
set -euo pipefail

fail() { echo "copy_closure: $*" >&2; exit 1; }

prune=() record="" base=""
while (($#)); do
  case "$1" in
    --prune) prune+=("${2:?--prune needs a library name}"); shift ;;
    --record) record=${2:?--record needs a file}; shift ;;
    --base) base=${2:?--base needs a file}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) fail "unknown option '$1' (see --help)" ;;
    *) break ;;
  esac
  shift
done
(($# >= 2)) || fail "usage: copy_closure.sh [--prune NAME]... [--base FILE] [--record FILE] ROOT FILE..."
root=$1
shift
mkdir -p "$root"
root=$(realpath "$root")
for tool in ldd readelf; do command -v "$tool" >/dev/null || fail "'$tool' is not installed"; done
((${#prune[@]} == 0)) || command -v patchelf >/dev/null || fail "'patchelf' is not installed (--prune)"

declare -A copied=()  # real path -> 1, for files already in ROOT
declare -A visited=() # file whose dependencies were followed -> 1
real=""

# The files of the base's packages, by the paths their packages list and those paths resolved.
declare -A in_base=()
if [[ -n $base ]]; then
  [[ -r $base ]] || fail "cannot read $base (--base)"
  while read -r package; do
    for list in /var/lib/dpkg/info/"$package".list /var/lib/dpkg/info/"$package":*.list; do
      [[ -f $list ]] || continue
      while read -r path; do
        in_base[$path]=1
        [[ $path != /lib* && $path != /bin/* && $path != /sbin/* ]] || in_base[/usr$path]=1
      done <"$list"
    done
  done <"$base"
fi

# The path with its folder resolved: /lib/x/libc.so.6 -> /usr/lib/x/libc.so.6.
canonical() { echo "$(realpath "$(dirname "$1")")/$(basename "$1")"; }

# Copies PATH into ROOT: each symbolic link of its chain as a link, then the file it ends at,
# whose real path it leaves in `real` (no subshell, so that `copied` keeps what it adds); a file
# of the base is not copied, and leaves `real` empty.
copy_path() {
  local path
  path=$(canonical "$1")
  if [[ -n ${in_base[$path]:-} ]]; then
    real=""
    return
  fi
  while [[ -L $path ]]; do
    local target
    target=$(readlink "$path")
    if [[ ! -L $root$path ]]; then
      mkdir -p "$root$(dirname "$path")"
      ln -sfn "$target" "$root$path"
    fi
    [[ $target == /* ]] || target=$(dirname "$path")/$target
    path=$(canonical "$target")
  done
  [[ -f $path ]] || fail "$1 resolves to $path, which is not a file"
  if [[ -z ${copied[$path]:-} ]]; then
    mkdir -p "$root$(dirname "$path")"
    cp -p "$path" "$root$path"
    copied[$path]=1
  fi
  real=$path
}

# The direct dependencies (sonames) of ELF file $1.
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

# Where the loader finds each library for the file being copied: ldd's "soname => path" lines,
# the paths as the loader opens them (through /usr/lib/x86_64-linux-gnu/libblas.so.3, whose
# $ORIGIN then finds libopenblas.so.0 there, not beside the file the link ends at).
declare -A resolved=()
resolve() {
  local soname path
  while read -r soname path; do
    [[ -n ${resolved[$soname]:-} ]] || resolved[$soname]=$path
  done < <(ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
}

# Copies ELF file $1 (a real path already in ROOT) and, depth first, its dependencies.
follow() {
  local file=$1
  [[ -z ${visited[$file]:-} ]] || return 0
  visited[$file]=1
  local -A dropped=()
  local soname path
  local name unused
  for name in "${prune[@]}"; do
    [[ $(basename "$file") == "$name"* ]] || continue
    # `ldd -u`: the direct dependencies no symbol of this file binds to.
    for unused in $(ldd -u "$file" 2>/dev/null | awk '/^\t\// {print $1}'); do
      unused=$(basename "$unused")
      patchelf --remove-needed "$unused" "$root$file"
      dropped[$unused]=1
    done
  done
  for soname in $(needed "$file"); do
    [[ -z ${dropped[$soname]:-} ]] || continue
    if [[ $soname == ld-linux* ]]; then
      path=$(readelf -l "$file" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
      [[ -n $path ]] || path=/lib64/$soname
    else
      [[ -n ${resolved[$soname]:-} ]] || resolve "$file"
      path=${resolved[$soname]:-}
    fi
    [[ -n $path ]] || fail "$file needs $soname, which the loader does not find"
    copy_path "$path"
    [[ -z $real ]] || follow "$real"
  done
  # The program interpreter of an executable.
  local interp
  interp=$(readelf -l "$file" 2>/dev/null | sed -n 's/.*interpreter: \(.*\)]/\1/p')
  [[ -z $interp ]] || copy_path "$interp"
}

for file in "$@"; do
  [[ -e $file ]] || fail "$file does not exist"
  resolved=()
  resolve "$file"
  copy_path "$file"
  [[ -z $real ]] || follow "$real"
done

if [[ -n $record ]]; then
  command -v dpkg-query >/dev/null || fail "'dpkg-query' is not installed (--record)"
  for path in "${!copied[@]}"; do
    # dpkg knows a file by the path its package installed: /lib/... or /usr/lib/... (merged /usr).
    owner=$(dpkg-query -S "$path" 2>/dev/null || dpkg-query -S "${path#/usr}" 2>/dev/null || true)
    owner=${owner%%: *}
    if [[ -z $owner ]]; then
      echo "$path -"
      continue
    fi
    owner=${owner%%,*}
    echo "$path $owner $(dpkg-query -W -f '${Version}' "$owner")"
  done | sort >"$record"
  for owner in $(awk '$2 != "-" {print $2}' "$record" | sort -u); do
    doc=/usr/share/doc/${owner%%:*}/copyright
    if [[ -f $doc ]]; then
      mkdir -p "$root$(dirname "$doc")"
      cp -p "$doc" "$root$doc"
    fi
  done
fi
