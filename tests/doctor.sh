#!/usr/bin/env bash
# tests/doctor.sh TOLK CASE: `tolk doctor` on the bundled model, on
# tests/fixtures/marian-tiny and on broken copies of it in a temp folder
# (tests/doctor.cmake registers one ctest per CASE). Small N keeps each run
# to seconds. The timing items (latency, memory) are checked for their
# figures, not their verdict: ctest runs in parallel on shared cores, where a
# tail ratio says more about the neighbours than about tolk.
set -u
tolk=$1 case=$2
src=$(cd "$(dirname "$0")/.." && pwd)
tiny=$src/tests/fixtures/marian-tiny
demo=$src/models/demo-en-zh
small=(--sentences-n 8 --memory-n 20 --memory-seconds 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; exit 1; }

# Runs the doctor with --json; $json is the output, $rc the exit status.
run_json() {
  json=$("$tolk" doctor --json "${small[@]}" "$@" 2>"$tmp/stderr")
  rc=$?
}

# Asserts with python3 over $json: every item present, those named PASS
# (or SKIP) as given, and the timing items carrying their figures.
expect() {
  python3 - "$json" "$@" <<'EOF' || { echo "$json"; cat "$tmp/stderr"; exit 1; }
import json, sys
doc = json.loads(sys.argv[1])
items = {i["name"]: i for i in doc["items"]}
want = ["integrity", "graphs", "provider", "cold-start", "latency", "memory", "rollback"]
assert list(items) == want, f"items {list(items)}"
for arg in sys.argv[2:]:
    name, status = arg.split("=")
    got = items[name]["status"]
    assert got == status, f"{name}: {got}, wanted {status}: {items[name]['figure']} {items[name]['details']}"
for name, keys in {"latency": ["p50_ms", "p95_ms", "p99_ms", "p99_over_p50"],
                   "memory": ["growth_24h_percent", "rss_bytes", "heap_growth_bytes_per_hour",
                              "anon_growth_bytes_per_hour", "settle_translations", "passes"],
                   "cold-start": ["seconds"]}.items():
    figures = items[name].get("figures", {})
    assert all(k in figures for k in keys), f"{name} lacks figures: {figures}"
assert doc["passed"] == all(i["status"] != "fail" for i in doc["items"])
EOF
}

case $case in
bundled)
  run_json -m "$demo"
  expect integrity=pass graphs=pass provider=pass cold-start=pass rollback=skip ;;
tiny)
  # The previous release: the bundled model, which must still translate.
  run_json -m "$tiny" --previous "$demo"
  expect integrity=pass graphs=pass provider=pass cold-start=pass rollback=pass ;;
corrupt)
  cp -r "$tiny" "$tmp/m"
  # One byte flipped in the middle of a graph: integrity fails and names it.
  f=$tmp/m/encoder_model.onnx
  off=$(( $(stat -c %s "$f") / 2 ))
  byte=$(dd if="$f" bs=1 skip=$off count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
  printf "$(printf '\\%03o' $(( byte ^ 1 )))" | dd of="$f" bs=1 seek=$off conv=notrunc 2>/dev/null
  out=$("$tolk" doctor -m "$tmp/m" "${small[@]}")
  rc=$?
  [ $rc -eq 1 ] || fail "exit status $rc, wanted 1"
  grep -q '^FAIL  integrity   14 of 15 files match tolk-manifest.json$' <<<"$out" || fail "no integrity FAIL line: $out"
  grep -Eq '^ +encoder_model.onnx: sha256 [0-9a-f]{64}, the list says [0-9a-f]{64}$' <<<"$out" ||
    fail "the corrupted file is not named: $out" ;;
no-manifest)
  cp -r "$tiny" "$tmp/m" && rm "$tmp/m/tolk-manifest.json"
  run_json -m "$tmp/m"
  [ $rc -eq 1 ] || fail "exit status $rc without a manifest, wanted 1"
  expect integrity=fail
  run_json -m "$tmp/m" --no-manifest-ok
  expect integrity=pass ;;
source-sha256)
  # The original weights the export came from, in sha256sum format.
  (cd "$tiny" && sha256sum model.safetensors) >"$tmp/SHA256SUMS"
  cp "$tiny/model.safetensors" "$tmp/"
  run_json -m "$tiny" --source-sha256 "$tmp/SHA256SUMS"
  expect integrity=pass
  printf 'x' >>"$tmp/model.safetensors"
  out=$("$tolk" doctor -m "$tiny" "${small[@]}" --source-sha256 "$tmp/SHA256SUMS")
  [ $? -eq 1 ] || fail "a changed original file passed"
  grep -q '^FAIL  integrity   15 of 15 files match tolk-manifest.json; 0 of 1 original files match$' <<<"$out" ||
    fail "no FAIL line for the original file: $out"
  grep -Eq '^ +model.safetensors: sha256 [0-9a-f]{64}, the list says' <<<"$out" || fail "not named: $out" ;;
bad-rollback)
  run_json -m "$tiny" --previous "$tmp/nowhere"
  [ $rc -eq 1 ] || fail "exit status $rc, wanted 1"
  expect rollback=fail
  grep -q "nowhere" <<<"$json" || fail "the missing previous folder is not named" ;;
*)
  fail "unknown case $case" ;;
esac
echo "ok: doctor $case"
