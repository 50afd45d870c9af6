#!/usr/bin/env bash
# serve_http.sh TOLK MODEL_DIR — `tolk serve` as its clients use it: real
# sockets on loopback, curl as the client. Every endpoint, every error
# status the service promises (400 with positions, 401, 403, 404, 405,
# 413, 415, 429, 503, 504), CORS, request ids, the access log, SIGHUP
# reloads (a broken version refused, a good one swapped in), --check, and
# SIGTERM → exit 0. Three servers: A with defaults, B with keys and
# limits, C with a tiny queue and deadline.
set -u
tolk=$1 model=$2
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
fails=0 checks=0

fail() {
  fails=$((fails + 1))
  echo "FAIL: $*" >&2
}

# start NAME ARGS...: starts a server, waits for its "listening on" line,
# sets ${NAME}_url and ${NAME}_pid.
start() {
  local name=$1
  shift
  "$tolk" serve --port 0 "$@" >"$work/$name.out" 2>"$work/$name.err" &
  local pid=$! i
  pids+=("$pid")
  for i in $(seq 1 200); do
    grep -q '^listening on ' "$work/$name.out" 2>/dev/null && break
    sleep 0.05
  done
  local url
  url=$(sed -n 's/^listening on //p' "$work/$name.out")
  [ -n "$url" ] || { echo "server $name did not start:" >&2; cat "$work/$name.err" >&2; exit 1; }
  eval "${name}_url=$url ${name}_pid=$pid"
}

# expect STATUS REGEX CURL-ARGS...: the status, and REGEX (grep -E) in the
# headers + body.
expect() {
  local want=$1 re=$2
  shift 2
  checks=$((checks + 1))
  local got
  got=$(curl -s -D "$work/headers" -o "$work/body" -w '%{http_code}' --max-time 20 "$@")
  if [ "$got" != "$want" ]; then
    fail "$* -> $got, wanted $want: $(head -c 300 "$work/body")"
  elif ! cat "$work/headers" "$work/body" | grep -Eq -- "$re"; then
    fail "$* -> $got without /$re/: $(head -c 300 "$work/body")"
  fi
}

J=(-H 'Content-Type: application/json')

# ---------------------------------------------------------------- --check and flags
checks=$((checks + 1))
"$tolk" serve --check -m "$model" >"$work/check.out" 2>&1 && grep -q '^ok ' "$work/check.out" || fail "--check on the fixture: $(cat "$work/check.out")"
checks=$((checks + 1))
"$tolk" serve --check -m "$work/none" >/dev/null 2>&1; [ $? = 1 ] || fail "--check on a missing folder is not 1"
checks=$((checks + 1))
"$tolk" serve --port nope >/dev/null 2>&1; [ $? = 2 ] || fail "a bad --port is not a usage error (2)"
checks=$((checks + 1))
"$tolk" serve --trusted-proxy 10.0.0.0/99 --check -m "$model" >/dev/null 2>&1; [ $? = 1 ] || fail "a bad --trusted-proxy passes --check"
checks=$((checks + 1))
"$tolk" --help | grep -q '^  serve ' || fail "tolk --help does not list serve"

# ---------------------------------------------------------------- server A: the APIs
cp -r "$model" "$work/model"
start A -m "$work/model" --access-log "$work/access.log" --cors-origin http://ok.example
A=$A_url

expect 200 '"status":"ok"' "$A/health"
expect 200 '"status":"ready"' "$A/ready"
expect 200 '"code":"en","name":"English","targets":\["zh-Hans","zh-Hant"' "$A/languages"
expect 200 '"charLimit":10000.*"target":\{"code":"zh-Hans"' "$A/frontend/settings"

# LibreTranslate /translate in every body format
expect 200 '^\{"translatedText":"[^"]+"\}$' "${J[@]}" -d '{"q":"Hello world.","source":"en","target":"zh"}' "$A/translate"
expect 200 '"translatedText":\["[^"]+","[^"]+"\]' "${J[@]}" -d '{"q":["Hello.","Open the file."],"source":"en","target":"zh-Hans"}' "$A/translate"
expect 200 '"translatedText":"[^"]+"' -d 'q=Hello+world&source=en&target=zt' "$A/translate"
expect 200 '"translatedText":"[^"]+"' -F q=Hello -F source=en -F target=zh "$A/translate"
expect 200 '"translatedText":"[^"]+"' -X POST "$A/translate?q=Hello&source=en&target=zh"
expect 200 '"detectedLanguage":\{"confidence":100,"language":"en"\}' -d 'q=Hello there&source=auto&target=zh' "$A/translate"
expect 200 '"alternatives":\[' -d 'q=Hello&source=en&target=zh&alternatives=2' "$A/translate"
expect 200 '"translatedText":"<p class=\\"x\\">[^<"]+<b>[^<"]+</b>[^<"]*</p>"' "${J[@]}" \
  -d '{"q":"<p class=\"x\">Hello <b>world</b>!</p>","source":"en","target":"zh","format":"html"}' "$A/translate"
expect 400 'Invalid HTML: </p> at byte 17 does not match <b> opened at byte 9' "${J[@]}" \
  -d '{"q":"<p>Hello <b>world</p>","source":"en","target":"zh","format":"html"}' "$A/translate"
expect 200 '^\[\{"confidence":[0-9.]+,"language":"en"\}\]$' -d 'q=What language is this?' "$A/detect"

# DeepL
expect 200 '^\{"translations":\[\{"detected_source_language":"EN","text":"[^"]+","billed_characters":5\},\{"detected_source_language":"EN","text":"[^"]+","billed_characters":7\}\]\}$' \
  -d 'text=Hello&text=Goodbye&target_lang=ZH' "$A/v2/translate"
expect 200 '"translations":\[\{' "${J[@]}" -d '{"text":["Hello"],"target_lang":"ZH-HANT","source_lang":"EN","split_sentences":"nonewlines"}' "$A/v2/translate"
expect 200 '"text":"<b>' -d 'text=<b>Hello</b>&target_lang=ZH&tag_handling=html' "$A/v2/translate"
expect 400 '^\{"message":"Parameter .target_lang. not specified."\}$' -d 'text=Hello' "$A/v2/translate"
expect 400 '"message":"Value for .split_sentences.' -d 'text=Hello&target_lang=ZH&split_sentences=2' "$A/v2/translate"
expect 200 '"language":"ZH-HANS","name":"Chinese \(simplified\)"' "$A/v2/languages?type=target"
expect 200 '^\[\{"language":"EN","name":"English"\}\]$' "$A/v2/languages"
expect 200 '"character_count":[1-9]' "$A/v2/usage"

# native
expect 200 '"sentences":\[\{"index":0,.*"score":-?[0-9.]+,"ids":\[[0-9,]+\],"n_best":\[\{"text":.*"timings_ms":\{"queue":' \
  "${J[@]}" -d '{"texts":["Hello world. Bye."],"beam":2,"n_best":2,"return_scores":true,"return_ids":true}' "$A/v1/translate"
expect 200 'event: sentence' "${J[@]}" -N -d '{"texts":["Hello world. Bye.","Open it."],"stream":true}' "$A/v1/translate"
grep -q '^event: done$' "$work/body" && [ "$(grep -c '^event: sentence$' "$work/body")" = 3 ] || fail "stream: 3 sentence events then done: $(cat "$work/body")"
grep -q 'Content-Type: text/event-stream' "$work/headers" || fail "stream: Content-Type"
expect 400 'n_best \(3\) must not exceed beam \(2\)' "${J[@]}" -d '{"texts":["x"],"beam":2,"n_best":3}' "$A/v1/translate"
# min_new_tokens = max_new_tokens: exactly that many tokens (the last the forced </s>), decoder start first
expect 200 '"ids":\[[0-9]+(,[0-9]+){12}\]' "${J[@]}" -d '{"texts":["Open file"],"min_new_tokens":12,"max_new_tokens":12,"return_ids":true}' "$A/v1/translate"
expect 400 'min_new_tokens \(13\) must not exceed max_new_tokens \(12\)' "${J[@]}" -d '{"texts":["x"],"min_new_tokens":13,"max_new_tokens":12}' "$A/v1/translate"

# ops
expect 200 'tolk_http_requests_total\{endpoint="/translate",code="200"\}' "$A/metrics"
for m in tolk_http_request_duration_seconds_bucket tolk_queue_wait_seconds_bucket tolk_decode_seconds_bucket \
         tolk_batch_rows_bucket tolk_batch_tokens_bucket tolk_sentences_total tolk_tokens_generated_total \
         tolk_queue_depth 'tolk_http_rejections_total\{reason="queue"\}' 'tolk_sentences_dropped_total' \
         'process_resident_memory_bytes [1-9]' 'tolk_model_info\{slot="0",model="model",folder=".*",source="en",targets="zh-Hans zh-Hant yue"'; do
  checks=$((checks + 1))
  grep -Eq "$m" "$work/body" || fail "/metrics lacks $m"
done
expect 200 '"openapi": ?"3' "$A/openapi.json"
expect 200 'Content-Type: text/html; charset=utf-8' "$A/"
etag=$(sed -n 's/^ETag: *//Ip' "$work/headers" | tr -d '\r')
grep -qi '^Cache-Control: no-cache' "$work/headers" || fail "/ has no Cache-Control"
expect 304 'ETag' -H "If-None-Match: $etag" "$A/"
expect 200 'X-Request-Id: my-id-42' -H 'X-Request-Id: my-id-42' "$A/health"
expect 200 'X-Request-Id: [0-9a-f]{16}' -H 'X-Request-Id: bad id with spaces' "$A/health"

# bad input: a clear error, never a crash
expect 400 'Invalid JSON at line 1, column 28 \(byte 27\): unexpected .}.' "${J[@]}" -d '{"q":"Hello","source":"en",}' "$A/translate"
expect 400 'q must be a string or an array of strings, not a number' "${J[@]}" -d '{"q":5,"source":"en","target":"zh"}' "$A/translate"
expect 400 'q\[1\] must be a string' "${J[@]}" -d '{"q":["a",2],"source":"en","target":"zh"}' "$A/translate"
expect 400 '"error":"Invalid request: missing q parameter"' "${J[@]}" -d '{"source":"en","target":"zh"}' "$A/translate"
expect 400 'missing q parameter' -d 'q=&source=en&target=zh' "$A/translate"
expect 400 'missing target parameter' -d 'q=Hi&source=en' "$A/translate"
expect 400 'not valid UTF-8 at byte 6' "${J[@]}" --data-binary $'{"q":"\xff","source":"en","target":"zh"}' "$A/translate"
expect 400 "field 'q' is not valid UTF-8 at byte 1 of its value \\(byte 3 of the body\\)" -d 'q=a%FF&source=en&target=zh' "$A/translate"
expect 400 'xx is not supported \(source languages: en\)' -d 'q=Hi&source=xx&target=zh' "$A/translate"
expect 400 'fr is not supported as a target language from en \(targets: zh-Hans, zh-Hant, yue\)' -d 'q=Hi&source=en&target=fr' "$A/translate"
expect 400 'html5 format is not supported' -d 'q=Hi&source=en&target=zh&format=html5' "$A/translate"
expect 400 'alternatives parameter must be <= 3' -d 'q=Hi&source=en&target=zh&alternatives=9' "$A/translate"
expect 400 'alternatives parameter is not a number' -d 'q=Hi&source=en&target=zh&alternatives=x' "$A/translate"
expect 415 "Unsupported media type 'text/plain'" -H 'Content-Type: text/plain' -d 'Hello' "$A/translate"
expect 405 'Allow: POST' "$A/translate"
expect 405 'Method Not Allowed' -X DELETE "$A/languages"
expect 404 '"error":"Not Found: /nope"' "$A/nope"
expect 413 'over the limit of 1048576 bytes' "${J[@]}" --data-binary "@$(head -c 1100000 /dev/zero | tr '\0' a > "$work/big"; echo "$work/big")" "$A/translate"

# CORS: only for --cors-origin
expect 204 'Access-Control-Allow-Origin: http://ok.example' -X OPTIONS -H 'Origin: http://ok.example' \
  -H 'Access-Control-Request-Method: POST' "$A/translate"
grep -qi 'Access-Control-Allow-Headers: Authorization, Content-Type' "$work/headers" || fail "preflight lacks Allow-Headers"
expect 200 'Access-Control-Allow-Origin: http://ok.example' -H 'Origin: http://ok.example' "$A/languages"
expect 200 'Content-Type' -H 'Origin: http://evil.example' "$A/languages"
grep -qi 'Access-Control-Allow-Origin' "$work/headers" && fail "CORS header for an origin not allowed"

# X-Forwarded-For is ignored without --trusted-proxy
expect 200 'ok' -H 'X-Forwarded-For: 203.0.113.7' -H 'X-Request-Id: xff-a' "$A/health"

# SIGHUP: a broken version is refused and the old one keeps serving ...
cp "$work/model/config.json" "$work/config.json"
echo ' ' >>"$work/model/config.json"
kill -HUP "$A_pid"
for i in $(seq 1 100); do grep -q 'reload failed' "$work/A.err" && break; sleep 0.05; done
grep -q 'reload failed, the previous models keep serving: .*config.json' "$work/A.err" || fail "broken reload not reported: $(cat "$work/A.err")"
expect 200 'tolk_model_reloads_total\{result="failed"\} 1' "$A/metrics"
grep -q 'tolk_model_reload_last_failure_info{reason=".*config.json' "$work/body" || fail "/metrics lacks the failure's reason"
version1=$(grep -o 'version="[0-9a-f]*"' "$work/body")
expect 200 '"translatedText"' -d 'q=Hello&source=en&target=zh' "$A/translate"
# ... and a good new version is swapped in.
cp "$work/config.json" "$work/model/config.json"
sed -i 's/"created_by": "[^"]*"/"created_by": "serve_http.sh"/' "$work/model/tolk-manifest.json"
kill -HUP "$A_pid"
for i in $(seq 1 100); do grep -q 'reload done' "$work/A.err" && break; sleep 0.05; done
expect 200 'tolk_model_reloads_total\{result="ok"\} 1' "$A/metrics"
version2=$(grep -o 'version="[0-9a-f]*"' "$work/body")
[ -n "$version1" ] && [ "$version1" != "$version2" ] || fail "the model version did not change on reload ($version1, $version2)"
expect 200 '"translatedText"' -d 'q=Hello&source=en&target=zh' "$A/translate"

# ---------------------------------------------------------------- server B: keys and limits
printf '# test keys\ntestkey-0001\nsmall-key-002 chars=5\nslow-key-003 rate=2/min\n' >"$work/keys"
start B -m "$model" --api-keys "$work/keys" --max-chars 20 --max-texts 2 --max-body 400 \
  --trusted-proxy 127.0.0.1/32 --access-log "$work/accessB.log"
B=$B_url
expect 400 'Please contact the server operator to get an API key' -d 'q=Hi&source=en&target=zh' "$B/translate"
expect 403 '"error":"Invalid API key"' -d 'q=Hi&source=en&target=zh&api_key=wrong-key-999' "$B/translate"
expect 200 'translatedText' -d 'q=Hi&source=en&target=zh&api_key=testkey-0001' "$B/translate"
expect 200 'translatedText' -H 'Authorization: Bearer testkey-0001' -d 'q=Hi&source=en&target=zh' "$B/translate"
expect 200 'translations' -H 'Authorization: DeepL-Auth-Key testkey-0001' -d 'text=Hi&target_lang=ZH' "$B/v2/translate"
expect 403 '"message":"Authorization failed' -d 'text=Hi&target_lang=ZH' "$B/v2/translate"
expect 401 'WWW-Authenticate: Bearer' "${J[@]}" -d '{"texts":["Hi"]}' "$B/v1/translate"
expect 200 '"keyRequired":true' "$B/frontend/settings"
expect 400 'exceeds text limit \(5\)' -H 'Authorization: Bearer small-key-002' -d 'q=Hello world&source=en&target=zh' "$B/translate"
expect 400 'request \(21\) exceeds text limit \(20\)' -H 'Authorization: Bearer testkey-0001' \
  -d "q=$(printf 'a%.0s' $(seq 21))&source=en&target=zh" "$B/translate"
expect 400 'request \(3\) exceeds text limit \(2\)' -H 'Authorization: Bearer testkey-0001' "${J[@]}" \
  -d '{"q":["a","b","c"],"source":"en","target":"zh"}' "$B/translate"
expect 413 'over the limit of 400 bytes' -H 'Authorization: Bearer testkey-0001' --data-binary "@$work/big" "$B/translate"
expect 200 'translatedText' -H 'Authorization: Bearer slow-key-003' -d 'q=Hi&source=en&target=zh' "$B/translate"
expect 200 'translatedText' -H 'Authorization: Bearer slow-key-003' -d 'q=Hi&source=en&target=zh' "$B/translate"
expect 429 'Retry-After: [1-9][0-9]*' -H 'Authorization: Bearer slow-key-003' -d 'q=Hi&source=en&target=zh' "$B/translate"
grep -q '"error":"Slowdown: too many requests' "$work/body" || fail "429 body: $(cat "$work/body")"
expect 200 'ok' -H 'X-Forwarded-For: 198.51.100.1, 203.0.113.7' -H 'X-Request-Id: xff-b' "$B/health"
expect 200 'tolk_http_rejections_total\{reason="auth"\} [1-9].*' "$B/metrics"
grep -q 'tolk_http_rejections_total{reason="rate_limit"} 1' "$work/body" || fail "rate-limit rejection not counted"
grep -q 'tolk_http_rejections_total{reason="body_size"} 1' "$work/body" || fail "body-size rejection not counted"

# ---------------------------------------------------------------- server C: queue and deadline
start C -m "$model" --max-queue 1 --timeout 0.000001
C=$C_url
expect 503 'Retry-After: 1' -d 'q=One. Two.&source=en&target=zh' "$C/translate"
grep -q '"error":"The translation queue is full; retry shortly"' "$work/body" || fail "503 body: $(cat "$work/body")"
expect 504 '"error":"Translation timed out after 1e-06 s' -d 'q=One.&source=en&target=zh' "$C/translate"
expect 200 'tolk_sentences_dropped_total\{slot="0",model="marian-tiny",reason="deadline"\} 1' "$C/metrics"

# ---------------------------------------------------------------- server D: the bundled default model (no -m)
start D
D=$D_url
expect 200 '^\{"translatedText":"打开文件"\}$' -d 'q=Open file&source=en&target=zh' "$D/translate"
expect 200 '"translations":\[\{"detected_source_language":"EN","text":"打开文件","billed_characters":9\}\]' -d 'text=Open file&target_lang=ZH' "$D/v2/translate"
expect 200 'tolk_model_info\{slot="0",model="demo-en-zh",.*int8="1",verified="1"' "$D/metrics"

# ---------------------------------------------------------------- the access log, then SIGTERM
for s in A B C D; do
  pid_var=${s}_pid
  kill -TERM "${!pid_var}"
  wait "${!pid_var}"
  rc=$?
  checks=$((checks + 1))
  [ $rc = 0 ] || fail "server $s exited $rc after SIGTERM: $(tail -3 "$work/$s.err")"
done
checks=$((checks + 1))
grep -q '"id":"xff-a","client":"127.0.0.1"' "$work/access.log" || fail "A logged X-Forwarded-For without --trusted-proxy"
grep -q '"id":"xff-b","client":"203.0.113.7"' "$work/accessB.log" || fail "B did not log the client from X-Forwarded-For"
grep -q '"endpoint":"/translate","status":200,"bytes_in":[0-9]*,"texts":1,"chars":[0-9]*,"sentences":1,"queue_ms":[0-9.]*,"compute_ms":[0-9.]*' \
  "$work/access.log" || fail "access log fields: $(head -2 "$work/access.log")"
grep -q 'key-00' "$work/accessB.log" && fail "a key is in the access log"
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$work/access.log" 2>/dev/null ||
  { command -v python3 >/dev/null && fail "access log lines are not JSON"; }

echo "serve_http: $checks checks, $fails failed"
[ $fails = 0 ]
