"""schemathesis, as an API's users run it, against GET /openapi.json.

Proves: for inputs generated from the service's own OpenAPI 3 document —
valid ones and, in negative mode, invalid ones — the server never answers
a 5xx other than the documented 503/504, invalid input is refused with a
4xx, and every response's status code, Content-Type and body conform to
what the document says. Bounded: a fixed seed, at most 25 examples per
operation and 45 s in all.
"""
import os
import subprocess
import sys

from conftest import TINY

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,"
          "response_schema_conformance,negative_data_rejection")


def test_schemathesis(start_server, tmp_path):
    s = start_server("-m", TINY, "--max-chars", "500", "--max-texts", "8")
    paths = s.get("/openapi.json").json().get("paths", {})
    assert paths, "GET /openapi.json describes no operations: schemathesis would test nothing"
    exe = os.path.join(os.path.dirname(sys.executable), "schemathesis")
    cmd = [exe, "--no-color", "--config-file", os.path.join(HERE, "schemathesis.toml"), "run",
           s.url + "/openapi.json", "--url", s.url, "--checks", CHECKS, "--mode", "all",
           "--max-examples", "25", "--max-time", "45", "--seed", "1", "--workers", "2",
           "--generation-database", "none", "--request-timeout", "20",
           "--report-dir", str(tmp_path), "--suppress-health-check", "all"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    print(r.stdout[-20000:])
    assert r.returncode == 0, f"schemathesis found failures (exit {r.returncode}):\n{r.stdout[-12000:]}\n{r.stderr[-2000:]}"
