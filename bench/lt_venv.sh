#!/usr/bin/env bash
# LibreTranslate's virtual environment for bench/serve_lt.py and bench/serve.sh's libretranslate-*
# rows: the pins of bench/lt-requirements.txt, apart from the stack's venv.
#   bench/lt_venv.sh [DIR]     (default /tmp/lt-venv; serve.sh's LT_PYTHON is DIR/bin/python)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:-/tmp/lt-venv}
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$here/lt-requirements.txt"
"$venv/bin/pip" check
echo "lt_venv: LibreTranslate $("$venv/bin/pip" show libretranslate | sed -n 's/^Version: //p') in $venv"
