#!/usr/bin/env bash
# make demo: the main job on the bundled default. Until the translator lands
# that is inspecting and checking a bundled model.
set -euo pipefail
tolk=${1:-build/tolk}
model=tests/fixtures/simple-cnn/model.onnx
[ -f "$model" ] || model=/usr/include/onnx/backend/test/data/node/test_conv_with_strides_padding/model.onnx
echo "== tolk inspect $model"
"$tolk" inspect "$model"
echo "== tolk check $model"
"$tolk" check "$model"
