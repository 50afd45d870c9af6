#!/usr/bin/env bash
# A model folder holding only the *_quantized graphs (as the bundled demo model
# ships) runs them without --int8, says so in `tolk info`, and translates
# exactly as `--int8` does on the full folder.
set -euo pipefail
tolk=$1 full=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp "$full"/*.json "$full"/*.spm "$full"/*_quantized.onnx "$dir"/
rm -f "$dir/tolk-manifest.json"
info=$("$tolk" info -m "$dir")
grep -q "^model in use: $dir  (-m)" <<<"$info" || { echo "info does not name the model: $info"; exit 1; }
grep -q "graphs (int8, the only ones in the folder)" <<<"$info" || { echo "info does not say int8: $info"; exit 1; }
text="The file cannot be opened."
a=$("$tolk" translate -m "$dir" --json "$text")
b=$("$tolk" translate -m "$full" --int8 --json "$text")
[ "$(grep -o '"ids":\[[^]]*\]' <<<"$a")" = "$(grep -o '"ids":\[[^]]*\]' <<<"$b")" ] ||
  { echo "int8-only folder: $a"; echo "--int8 on full folder: $b"; exit 1; }
# Without -m and without $TOLK_MODEL, `tolk info` names the bundled default or says there is none.
out=$(env -u TOLK_MODEL "$tolk" info 2>&1 || true)
grep -Eq "^model in use: .*models/demo-en-zh  \(bundled default\)|no model: pass -m" <<<"$out" ||
  { echo "no -m: $out"; exit 1; }
echo "ok"
