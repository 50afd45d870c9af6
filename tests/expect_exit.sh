#!/usr/bin/env bash
# tests/expect_exit.sh STREAM CODE REGEX... -- COMMAND...: runs COMMAND and
# passes when it exits with status CODE and each extended REGEX matches a line
# of what it wrote to STREAM (stdout or stderr). An error test checks the
# message and the status, not just "non-zero" (tests/CMakeLists.txt,
# tolk_cli_test).
set -u
stream=$1 code=$2
shift 2
res=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  res+=("$1")
  shift
done
[ $# -gt 1 ] || { echo "usage: expect_exit.sh stdout|stderr CODE REGEX... -- COMMAND..."; exit 2; }
shift
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err"
rc=$?
case $stream in
  stdout) file=$out ;;
  stderr) file=$err ;;
  *) echo "expect_exit.sh: STREAM is stdout or stderr, not '$stream'"; exit 2 ;;
esac
ok=1
[ "$rc" -eq "$code" ] || { echo "exit status $rc, wanted $code"; ok=0; }
for re in "${res[@]}"; do
  grep -Eq -- "$re" "$file" || { echo "no line of $stream matches /$re/"; ok=0; }
done
if [ $ok -eq 0 ]; then
  echo "command: $*"
  echo "stdout:"; sed 's/^/  | /' "$out"
  echo "stderr:"; sed 's/^/  | /' "$err"
  exit 1
fi
echo "ok: exit $rc, $stream matches ${#res[@]} pattern(s)"
