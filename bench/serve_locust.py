"""Locust's closed loop for bench/serve.sh (bench/serve_bench.py runs it headless at 1, 8, 32 and 64
users): each user posts PER_REQUEST sentences (1 or 4) in one request, waits for the answer, posts the next — the table users of
PyTorch and ONNX Runtime services publish. SENTENCES (one a line), NEW_TOKENS (0: natural length), BEAM and
API (native or libretranslate) come from the driver; the request is the one bench/serve_load.py sends, and a
200 without translations in it counts as a failure. A user told 503 or 429 with Retry-After waits that long."""
import os
import random
import time

from locust import HttpUser, task

from serve_load import answered, request

SENTENCES = [s for s in open(os.environ["SENTENCES"], encoding="utf-8").read().splitlines() if s.strip()]
NEW_TOKENS = int(os.environ.get("NEW_TOKENS", "32"))
BEAM = int(os.environ.get("BEAM", "1"))
PER_REQUEST = int(os.environ.get("PER_REQUEST", "1"))
API = os.environ.get("API", "native")


class Translator(HttpUser):
    @task
    def translate(self):
        path, body = request(API, random.sample(SENTENCES, PER_REQUEST), NEW_TOKENS, BEAM)
        with self.client.post(path, json=body, timeout=60, catch_response=True) as r:
            if r.status_code == 200 and not answered(API, r.content):
                r.failure("200 without translations")
        # A refusal says when to come back (RFC 9110, Retry-After): a client that asks again at once
        # only turns the server's CPU into 503s. Locust counts the refusal as a failure either way.
        if r.status_code in (429, 503) and r.headers.get("Retry-After", "").isdigit():
            time.sleep(int(r.headers["Retry-After"]))
