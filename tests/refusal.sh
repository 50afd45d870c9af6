# tests/refusal.sh, sourced by the CLI tests of the verbs that write files (quantize.sh, optimize.sh) after
# they set tolk and verb: a temporary folder, fail, and expect_refusal.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Runs tolk $verb expecting exit 2, a stderr line matching $1, and an empty $tmp/out.
expect_refusal() {
  local re=$1; shift
  mkdir -p "$tmp/out"
  "$tolk" "$verb" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  [ $rc -eq 2 ] || fail "exit status $rc, wanted 2: $(cat "$tmp/stderr")"
  grep -Eq -- "$re" "$tmp/stderr" || fail "stderr does not match /$re/: $(cat "$tmp/stderr")"
  [ -z "$(ls -A "$tmp/out")" ] || fail "files left behind: $(ls -A "$tmp/out")"
}
