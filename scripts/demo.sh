#!/usr/bin/env bash
# make demo: the main job — English to Chinese with `tolk translate` — on the
# bundled default model (models/demo-en-zh, issue 7), then what the engine
# underneath shows of it. Without that model (a checkout that predates it)
# the random-weight test fixture stands in, and says so.
set -euo pipefail
tolk=${1:-build/tolk}
root=$(cd "$(dirname "$0")/.." && pwd)
bundled=$root/models/demo-en-zh
if [[ -n ${TOLK_MODEL:-} ]]; then
  model=$TOLK_MODEL
  echo "== tolk translate (model from \$TOLK_MODEL: $model)"
elif [[ -f $bundled/config.json ]]; then
  model=$bundled
  cat <<EOT
== tolk translate  (no -m: the bundled demo model, models/demo-en-zh)
   A small Marian model (7.8 M parameters) trained on this project's build machine from the
   English/Chinese message catalogues of free software. It knows software-interface text —
   menus, buttons, error messages — and little else: a demo, not a general translator.
EOT
else
  model=$root/tests/fixtures/marian-tiny
  export TOLK_MODEL=$model
  cat <<EOT
== tolk translate -m $model
   No bundled demo model in this checkout; this is the test fixture: the real Marian architecture
   at d_model 64 with 2+2 layers, trained for a few minutes so that the tests have something to
   check. Its output is NOT a real translation.
EOT
fi
"$tolk" translate \
  "Open file" \
  "Save as…" \
  "Permission denied" \
  "The file cannot be opened because the directory does not exist." \
  "Print version information and exit."
echo
echo "== the same engine, streaming from stdin with timings (--json, beam 4)"
printf 'No such file or directory\nNetwork is unreachable\n' | "$tolk" translate --beam 4 --json
echo
echo "== tolk info"
"$tolk" info
echo
echo "== tolk inspect (the encoder graph)"
# the first encoder graph the folder has (an int8-only bundle has just the _quantized one)
enc=
for f in "$model"/encoder_model.onnx "$model"/encoder_model_quantized.onnx "$model"/onnx/encoder_model*.onnx; do
  if [[ -f $f ]]; then enc=$f; break; fi
done
"$tolk" inspect "$enc" | head -n 25
echo
cat <<'EOT'
== The real model: Helsinki-NLP/opus-mt-en-zh (needs internet once, for the export)
   python3 -m venv ~/tolk-venv && ~/tolk-venv/bin/pip install -r tools/requirements.txt
   ~/tolk-venv/bin/python tools/export.py Helsinki-NLP/opus-mt-en-zh opus-mt-en-zh --quantize int8
   build/tolk translate -m opus-mt-en-zh --int8 "Hello, world! How are you today?"
EOT
