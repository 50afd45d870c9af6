#!/usr/bin/env bash
# tests/vmap_build.sh TOLK MODEL_DIR PAIRS: `tolk vmap build` writes a
# shortlist in CTranslate2's format (the always line first, then one
# "source<TAB>targets" line per source piece) that `tolk translate --vmap`
# reads; a failed build leaves neither the file nor a temporary one.
set -euo pipefail
tolk=$1 model=$2 pairs=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cut -f2 "$pairs" > "$dir/src.txt"
cut -f3 "$pairs" > "$dir/tgt.txt"
"$tolk" vmap build -m "$model" --pairs "$pairs" -o "$dir/a.vmap" --top-k 5 --always 20 2>"$dir/log" || fail "build: $(cat "$dir/log")"
"$tolk" vmap build -m "$model" --source "$dir/src.txt" --target "$dir/tgt.txt" -o "$dir/b.vmap" --top-k 5 --always 20 2>/dev/null \
  || fail "build from --source/--target"
cmp -s "$dir/a.vmap" "$dir/b.vmap" || fail "--pairs and --source/--target give different shortlists"
head -1 "$dir/a.vmap" | grep -Eq $'^\t[^ \t]+( [^ \t]+){19}$' || fail "first line is not the 20 always-included targets"
[ "$(awk -F'\t' 'NR > 1 && (NF != 2 || $1 == "" || split($2, t, " ") > 5)' "$dir/a.vmap" | wc -l)" = 0 ] \
  || fail "a rule line is not 'source<TAB>at most 5 targets'"
[ "$(wc -l < "$dir/a.vmap")" -gt 10 ] || fail "too few rules: $(wc -l < "$dir/a.vmap")"
"$tolk" translate -m "$model" --vmap "$dir/a.vmap" "Open the file." >/dev/null 2>"$dir/log" || fail "translate: $(cat "$dir/log")"
head -3 "$pairs" > "$dir/short.txt"
echo "one line without the source column" >> "$dir/short.txt"
if "$tolk" vmap build -m "$model" --pairs "$dir/short.txt" -o "$dir/c.vmap" 2>/dev/null; then fail "a line without a tab built"; fi
[ ! -e "$dir/c.vmap" ] && [ -z "$(ls "$dir" | grep '\.tmp\.')" ] || fail "a failed build left a file: $(ls "$dir")"
head -3 "$dir/src.txt" > "$dir/src3.txt"
if "$tolk" vmap build -m "$model" --source "$dir/src3.txt" --target "$dir/tgt.txt" -o "$dir/d.vmap" 2>"$dir/log"; then
  fail "sides of different lengths built"
fi
grep -q "has fewer lines than" "$dir/log" || fail "uneven sides: $(cat "$dir/log")"
echo "ok: vmap build and translate --vmap"
