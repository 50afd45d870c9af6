#!/usr/bin/env bash
# make demo: the main job — English to Chinese with `tolk translate` — on the
# bundled default model, then what the engine underneath shows of it.
set -euo pipefail
tolk=${1:-build/tolk}
model=${TOLK_MODEL:-tests/fixtures/marian-tiny}
cat <<EOT
== tolk translate -m $model
   This bundled model is a toy: the real Marian architecture at d_model 64 with 2+2 layers,
   trained for a few minutes on software messages so that the tests have something to check.
   Its output is NOT a real translation.
EOT
"$tolk" translate -m "$model" --int8 \
  "Cannot open package list." \
  "The file cannot be opened because the directory does not exist." \
  "Print version information and exit."
echo
echo "== the same, streaming from stdin with timings (--json)"
printf 'Permission denied\nNetwork is unreachable\n' | "$tolk" translate -m "$model" --int8 --json
echo
echo "== tolk info -m $model"
"$tolk" info -m "$model"
echo
echo "== tolk inspect $model/encoder_model.onnx"
"$tolk" inspect "$model/encoder_model.onnx" | head -n 25
echo
cat <<'EOT'
== The real model: Helsinki-NLP/opus-mt-en-zh (needs internet once, for the export)
   python3 -m venv ~/tolk-venv && ~/tolk-venv/bin/pip install -r tools/requirements.txt
   ~/tolk-venv/bin/python tools/export.py Helsinki-NLP/opus-mt-en-zh opus-mt-en-zh --quantize int8
   build/tolk translate -m opus-mt-en-zh --int8 "Hello, world! How are you today?"
EOT
