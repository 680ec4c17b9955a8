#!/usr/bin/env bash
# tests/install/run.sh — the installed layout, used as a new user would.
#
# Installs the build into a fresh non-system prefix (`make install
# PREFIX=...`), then checks, without LD_LIBRARY_PATH:
#   - the layout: binaries, libldpref.so.VERSION and its links, the header,
#     ldpref.pc, the three manual pages; `ldpref --version` runs;
#   - docs/client.md: every ```c block is compiled with
#     `pkg-config --cflags --libs ldpref` from the prefix (-Wall -Wextra
#     -Werror), finds libldpref.so through the rpath, and is run against a
#     real ldpref-server (port 0, a temporary database) with an enrolled key
#     and answers on stdin; the labels it reports must be on the server;
#   - docs/client.md's ```sh blocks (building a program from the prefix,
#     DIR = the prefix, app.c = the first C block) run as written: each
#     builds a program that runs, finding libldpref.so in the prefix or
#     having libldpref.a linked in;
#   - `pkg-config --static`: its flags link, and a fully static link
#     (`cc -static`) fails only for the reason docs/client.md gives
#     (archives Debian does not ship);
#   - the manual pages render with `man --warnings` without a warning, and
#     every option that --help shows (each command's, in its own
#     subsection) is in its page.
# Prints "N passed, N failed"; exit status 1 if anything failed.
# The sanitizer build (LDPREF_SAN=1, or a library built with
# -fsanitize=address, as when .ci/run calls tests/run.sh on build/asan): the
# doc programs get the same -fsanitize flags as the library they link.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
ROOT=$PWD
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check DESCRIPTION COMMAND...: passes when COMMAND exits 0
  local what=$1; shift
  if "$@"; then ok; else bad "$what"; fi
}

T=$(mktemp -d /tmp/ldpref-install.XXXXXX)
SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  [ -n "${KEEP:-}" ] && echo "kept $T" && return; rm -rf "$T"
}
trap cleanup EXIT
P=$T/prefix
unset LD_LIBRARY_PATH
SANFLAGS=()
if [ "${LDPREF_SAN:-}" = 1 ] || nm "$BUILD/libldpref.a" 2>/dev/null | grep -q ' U __asan_'; then
  SANFLAGS=(-fsanitize=address,undefined)
fi

# ---- install -------------------------------------------------------------
if ! make -s --no-print-directory install BUILD="$BUILD" PREFIX="$P" >"$T/install.log" 2>&1; then
  cat "$T/install.log"
  bad "make install PREFIX=$P"
  echo "$pass passed, $fail failed"
  exit 1
fi
ok
VERSION=$("$P/bin/ldpref" --version | awk '{print $2}')
check "ldpref --version from the prefix prints a version" test -n "$VERSION"
check "ldpref-train --version agrees" test "$("$P/bin/ldpref-train" --version)" = "ldpref-train $VERSION"
for f in bin/ldpref bin/ldpref-server bin/ldpref-train include/ldpref.h lib/libldpref.a \
         "lib/libldpref.so.$VERSION" lib/libldpref.so.0 lib/libldpref.so lib/pkgconfig/ldpref.pc \
         share/man/man1/ldpref.1 share/man/man1/ldpref-server.1 share/man/man1/ldpref-train.1; do
  check "installed: $f" test -e "$P/$f"
done
export PKG_CONFIG_PATH=$P/lib/pkgconfig
check "pkg-config finds ldpref $VERSION" test "$(pkg-config --modversion ldpref)" = "$VERSION"

# ---- a real server with one task campaign and an enrolled key ------------
"$P/bin/ldpref-server" --db "$T/ldpref.db" --port 0 --log-level warn >"$T/server.out" 2>"$T/server.err" &
SERVER_PID=$!
for _ in $(seq 1 200); do
  grep -q '^listening on ' "$T/server.out" && break
  sleep 0.05
done
export LDPREF_SERVER LDPREF_OPERATOR_TOKEN LDPREF_KEY=$T/key
LDPREF_SERVER=$(sed -n 's/^listening on //p' "$T/server.out")
LDPREF_OPERATOR_TOKEN=$(sed -n 's/^operator token: //p' "$T/server.out")
check "the installed server starts" test -n "$LDPREF_SERVER" -a -n "$LDPREF_OPERATOR_TOKEN"
for i in 1 2 3 4; do
  printf '{"prompt": "question %d", "chosen": "answer one to %d", "rejected": "answer two to %d"}\n' "$i" "$i" "$i"
done >"$T/tasks.jsonl"
check "tasks load" "$P/bin/ldpref" admin tasks-load "$T/tasks.jsonl" >/dev/null
ET=$("$P/bin/ldpref" admin enroll-token | grep -o 'et_[A-Za-z0-9_-]*' | head -1)
check "keygen and enroll" eval '"$P/bin/ldpref" keygen >/dev/null && "$P/bin/ldpref" enroll "$ET" >/dev/null'
# The key's own ledger: the doc program and the CLI share it.
exported_labels() {
  "$P/bin/ldpref" admin export --out "$T/export.jsonl" >/dev/null && grep -c . "$T/export.jsonl"
}

# ---- docs/client.md: every C block compiles and runs ---------------------
awk -v dir="$T" '/^```c[[:space:]]*$/ { f = 1; n++; next } /^```/ { f = 0 }
  f { print > (dir "/doc_" n ".c") }' docs/client.md
blocks=$(ls "$T"/doc_*.c 2>/dev/null | wc -l)
check "docs/client.md has C blocks" test "$blocks" -ge 1
read -r -a CFLAGS_LIBS <<<"$(pkg-config --cflags --libs ldpref)"
before=0
for src in "$T"/doc_*.c; do
  [ -e "$src" ] || continue
  prog=${src%.c}
  name="docs/client.md C block $(basename "$prog" | sed 's/doc_//')"
  if ! cc -std=c11 -Wall -Wextra -Werror "${SANFLAGS[@]}" -o "$prog" "$src" "${CFLAGS_LIBS[@]}" 2>"$prog.cc"; then
    cat "$prog.cc"; bad "$name compiles against the installed library"; continue
  fi
  ok
  check "$name finds libldpref.so in the prefix (rpath)" \
    eval "ldd '$prog' | grep -q 'libldpref.so.0 => $P/lib/libldpref.so.0'"
  # Answers on stdin: a, b, t (can't tell); the program answers what it fetched.
  if printf 'a\nb\nt\n' | "$prog" >"$prog.out" 2>"$prog.err"; then ok; else
    cat "$prog.out" "$prog.err"; bad "$name runs against the server"; fi
  ids=$(grep -o 'sent: label [0-9]*' "$prog.out" | awk '{print $3}')
  sent=$(echo "$ids" | grep -c .)
  now=$(exported_labels)
  check "$name: its $sent labels are on the server" test "$sent" -ge 1 -a "$now" -eq $((before + sent))
  for id in $ids; do
    check "$name: label $id in the export" grep -q "\"label_id\":$id," "$T/export.jsonl"
  done
  before=$now
done

# ---- pkg-config --static -------------------------------------------------
src=$T/doc_1.c
read -r -a STATIC_LIBS <<<"$(pkg-config --static --libs ldpref)"
read -r -a CFLAGS_ONLY <<<"$(pkg-config --cflags ldpref)"
check "pkg-config --static --libs ldpref" test "${#STATIC_LIBS[@]}" -gt 0
if cc "${SANFLAGS[@]}" -o "$T/static_flags" "$src" "${CFLAGS_ONLY[@]}" "${STATIC_LIBS[@]}" 2>"$T/static_flags.err"; then
  ok; else cat "$T/static_flags.err"; bad "cc with pkg-config --static flags links"; fi
# The shell blocks of docs/client.md (building a program), as written with
# DIR the prefix and app.c the first C block: each builds a.out, which runs
# and whose libldpref, if it needs one, is the prefix's.
awk -v dir="$T" '/^ *```sh *$/ { f = 1; n++; ind = index($0, "`") - 1; next }
  f && /^ *```/ { f = 0; next }
  f { print substr($0, ind + 1) > (dir "/sh_" n ".sh") }' docs/client.md
for block in "$T"/sh_*.sh; do
  [ -e "$block" ] || continue
  name="docs/client.md shell block $(basename "$block" .sh | sed 's/sh_//')"
  d=${block%.sh}.d
  mkdir -p "$d" && cp "$src" "$d/app.c"
  sed -i "s|DIR|$P|g" "$block"
  [ ${#SANFLAGS[@]} -gt 0 ] && sed -i "s|^cc |cc ${SANFLAGS[*]} |" "$block"
  if (cd "$d" && bash -e "$block") >"$d/out" 2>&1 && [ -x "$d/a.out" ]; then ok; else
    cat "$d/out"; bad "$name builds a.out"; continue; fi
  check "$name: a.out's libldpref is the prefix's or linked in" \
    eval "! ldd '$d/a.out' | grep libldpref | grep -vq '=> $P/lib/libldpref.so.0'"
  if grep -q -- -Bstatic "$block"; then
    check "$name: libldpref.a linked in, no libldpref.so needed" eval "! ldd '$d/a.out' | grep -q libldpref"
  fi
  printf '' | "$d/a.out" >/dev/null 2>&1
  check "$name: a.out reaches the server" test $? -eq 0
done
# cc -static: docs/client.md says it fails for want of these archives only.
UNSHIPPED="gssapi_krb5 p11-kit"
if [ ${#SANFLAGS[@]} -eq 0 ]; then
  if cc -static -o "$T/full_static" "$src" "${CFLAGS_ONLY[@]}" "${STATIC_LIBS[@]}" 2>"$T/full_static.err"; then
    bad "cc -static now links: update docs/client.md (Installing: fully static)"
  else
    missing=$(sed -n 's/.*cannot find -l\([^:]*\):.*/\1/p' "$T/full_static.err" | sort -u)
    other=$(for m in $missing; do case " $UNSHIPPED " in *" $m "*) ;; *) echo "$m" ;; esac; done)
    check "cc -static fails only on archives Debian does not ship (missing: $(echo $missing))" \
      test -n "$missing" -a -z "$other"
  fi
fi

# ---- manual pages --------------------------------------------------------
export MANWIDTH=200 LC_ALL=C.UTF-8
for page in ldpref ldpref-server ldpref-train; do
  man --warnings -l "$P/share/man/man1/$page.1" >"$T/$page.txt" 2>"$T/$page.warn"
  check "man $page renders" test -s "$T/$page.txt"
  check "man $page renders without warnings: $(head -c 300 "$T/$page.warn")" test ! -s "$T/$page.warn"
done
# options_of TEXT: the --options a help text shows in its option lists
options_of() { grep -oE -- '(^|[ ,(])--[a-z0-9][a-z0-9-]*' | sed 's/^[ ,(]//' | sort -u; }
# section PAGE.txt HEADING: the rendered lines from the (sub)section whose
# heading starts with HEADING up to the next heading of the same or a higher level
section() {
  awk -v h="$2" '
    /^[A-Z]/ { if (on) exit }
    /^   [^ ]/ { if (on) exit; if (index($0, "   " h) == 1 && (length($0) == length(h) + 3 || substr($0, length(h) + 4, 1) ~ /[ ,]/)) { on = 1; next } }
    /^[A-Z]/ && $0 == h { on = 1; next }
    on' "$1"
}
# all_in OPTIONS TEXTFILE: every option is in the text
all_in() {
  local o missing=""
  for o in $1; do grep -qF -- "$o" "$2" || missing="$missing $o"; done
  [ -z "$missing" ] || { echo "missing:$missing"; return 1; }
}
# ldpref: global options, then each command's own options in its subsection.
"$P/bin/ldpref" --help >"$T/help.txt"
sed -n '/^Global options/,$p' "$T/help.txt" | options_of >"$T/opts"
section "$T/ldpref.txt" "GLOBAL OPTIONS" >"$T/sec"
check "man ldpref: every global option" all_in "$(cat "$T/opts")" "$T/sec"
commands=$(sed -n '/^Commands:/,/^$/p' "$T/help.txt" | sed -n 's/^  //p' | sed 's/  .*//' |
  awk '{ c = ""; for (i = 1; i <= NF && $i ~ /^[a-z][a-z-]*$/; i++) c = c (c ? " " : "") $i; if (c != "" && c != "version") print c }')
check "ldpref --help lists commands" test -n "$commands"
while IFS= read -r cmd; do
  # shellcheck disable=SC2086
  "$P/bin/ldpref" $cmd --help | sed '/^Global options/,$d' | sed -n '/^Options:/,$p' | options_of >"$T/opts"
  section "$T/ldpref.txt" "ldpref $cmd" >"$T/sec"
  check "man ldpref: subsection of '$cmd'" test -s "$T/sec"
  check "man ldpref: every option of '$cmd'" all_in "$(cat "$T/opts")" "$T/sec"
done <<<"$commands"
# ldpref-server: one table.
"$P/bin/ldpref-server" --help | options_of >"$T/opts"
section "$T/ldpref-server.txt" "OPTIONS" >"$T/sec"
check "man ldpref-server: every option" all_in "$(cat "$T/opts")" "$T/sec"
check "man ldpref-server: as many options as --help" \
  test "$(grep -c . "$T/opts")" -ge 40
# ldpref-train: each command's table in its subsection.
tcommands=$("$P/bin/ldpref-train" --help | sed -n '/^commands:/,$p' | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p' | grep -vx version)
check "ldpref-train --help lists commands" test -n "$tcommands"
for cmd in $tcommands; do
  "$P/bin/ldpref-train" "$cmd" --help | sed -n '/^options:/,$p' | options_of >"$T/opts"
  section "$T/ldpref-train.txt" "ldpref-train $cmd" >"$T/sec"
  check "man ldpref-train: subsection of '$cmd'" test -s "$T/sec"
  check "man ldpref-train: every option of '$cmd'" all_in "$(cat "$T/opts")" "$T/sec"
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
