#!/usr/bin/env bash
# tolk translate --input/--output: a full job, then the same job stopped
# half-way (its output cut to 10 lines plus half a line, as a kill would
# leave it) and continued with --resume, must give the same file; stdin mode
# must give the same lines, in order.
set -euo pipefail
tolk=$1 model=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 40); do echo "Line $i: open the file number $i. Then close it."; done >"$work/in.txt"
echo "" >>"$work/in.txt"
echo "The last line." >>"$work/in.txt"
opts=(-m "$model" --beam 1 --max-new-tokens 6 --threads 1)
"$tolk" translate "${opts[@]}" --input "$work/in.txt" --output "$work/full.txt" 2>/dev/null
[ "$(wc -l <"$work/full.txt")" -eq 42 ] || { echo "full job: $(wc -l <"$work/full.txt") lines, want 42"; exit 1; }
head -n 10 "$work/full.txt" >"$work/part.txt"
printf 'half a li' >>"$work/part.txt"
"$tolk" translate "${opts[@]}" --input "$work/in.txt" --output "$work/part.txt" --resume 2>/dev/null
cmp "$work/full.txt" "$work/part.txt" || { echo "resumed output differs"; exit 1; }
"$tolk" translate "${opts[@]}" <"$work/in.txt" >"$work/stdin.txt"
cmp "$work/full.txt" "$work/stdin.txt" || { echo "stdin output differs from the file job"; exit 1; }
echo "translate file job, resume and stdin: identical"
