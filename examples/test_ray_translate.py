"""examples/ray_translate.py on a local Ray cluster (2 CPUs, 2 actors): its records equal
`tolk translate --json`'s for the same lines, a rerun resumes by input file, Parquet holds the
same records; and the Kubernetes manifests of examples/k8s parse and hang together.
Run by scripts/ray_test.sh, which sets TOLK_CLI and TOLK_ROOT."""
import importlib.util
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(os.environ.get("TOLK_ROOT", Path(__file__).resolve().parents[1]))
CLI = Path(os.environ.get("TOLK_CLI", ROOT / "build" / "tolk"))
MODEL = ROOT / "tests" / "fixtures" / "marian-tiny"

spec = importlib.util.spec_from_file_location("ray_translate", ROOT / "examples" / "ray_translate.py")
rt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rt)

# One sentence a line: the example translates each line as one model input.
BLOCKS = {
    "a.txt": ["Open the file.", "Save it.", "The quick brown fox jumps over the lazy dog.",
              "Dr. Smith paid $3.50 for two apples.", "Hello world"],
    "b.txt": ["Click the button to continue.", "The server is not responding", "Cancel",
              "Your password has expired", "Delete 3 files?", "Loading…"],
    "c.txt": ["Permission denied", "Connection lost: trying again in 5 seconds"],
    "empty.txt": [],
}


@pytest.fixture(scope="module")
def cluster():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=256 << 20)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("parts")
    for name, lines in BLOCKS.items():
        (d / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return sorted(d.iterdir())


def cli_records(path: Path):
    """`tolk translate --json` over the file's lines: line, source, translation, score."""
    with open(path, "rb") as f:
        out = subprocess.run([str(CLI), "translate", "-m", str(MODEL), "--threads", "1", "--json"],
                             stdin=f, capture_output=True, check=True).stdout.decode()
    return [{k: r[k] for k in ("line", "source", "translation", "score")}
            for r in map(json.loads, out.splitlines())]


def same_records(got, want):
    """Equal records; scores compared as the float32 tolk computes them, since the CLI's JSON
    prints them to 15 significant digits only."""
    key = lambda rs: [{**r, "score": np.float32(r["score"])} for r in rs]  # noqa: E731
    return key(got) == key(want)


def read_jsonl(path: Path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def run(inputs, out, *extra):
    return rt.main([*map(str, inputs), "-m", str(MODEL), "-o", str(out), "--batch-size", "4", *extra])


@pytest.fixture(scope="module")
def translated(cluster, corpus, tmp_path_factory):
    """The corpus through two actors, JSON lines."""
    out = tmp_path_factory.mktemp("out")
    assert run(corpus, out, "--actors", "2") == 0
    return out


def test_records_equal_the_cli(corpus, translated):
    assert sorted(p.name for p in translated.iterdir()) == sorted(f"{n}.jsonl" for n in BLOCKS)
    for src in corpus:
        got = read_jsonl(translated / f"{src.name}.jsonl")
        assert len(got) == len(BLOCKS[src.name])
        assert same_records(got, cli_records(src)), (src.name, got)
    # The scores are real: tolk's log-probabilities, negative and not all equal.
    scores = [r["score"] for r in read_jsonl(translated / "b.txt.jsonl")]
    assert all(s < 0 for s in scores) and len(set(scores)) > 1


def test_a_rerun_resumes_by_input_file(corpus, translated):
    want = {p.name: p.read_bytes() for p in translated.iterdir()}
    stamps = {p.name: p.stat().st_mtime_ns for p in translated.iterdir()}
    # A job stopped while writing b.txt: its output never got its final name.
    (translated / "b.txt.jsonl").rename(translated / "b.txt.jsonl.part")
    (translated / "b.txt.jsonl.part").write_text('{"line": 1, "source": "cut')
    assert run(corpus, translated, "--actors", "1", "--format", "jsonl") == 0
    assert {p.name: p.read_bytes() for p in translated.iterdir()} == want
    for name in ("a.txt.jsonl", "c.txt.jsonl", "empty.txt.jsonl"):
        assert (translated / name).stat().st_mtime_ns == stamps[name], f"{name} was written again"


def test_parquet_holds_the_same_records(cluster, corpus, tmp_path):
    import pyarrow.parquet as pq

    assert run(corpus[:2], tmp_path, "--format", "parquet") == 0
    for src in corpus[:2]:
        table = pq.read_table(tmp_path / f"{src.name}.parquet")
        assert table.column_names == ["line", "source", "translation", "score"]
        assert table.schema.field("score").type == "double"
        assert same_records(table.to_pylist(), cli_records(src))


def test_missing_input_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        run([tmp_path / "nope.txt"], tmp_path / "out")
    assert e.value.code == 2
    assert "nope.txt: not a file" in capsys.readouterr().err


def test_kubernetes_manifests():
    serve = list(yaml.safe_load_all((ROOT / "examples/k8s/tolk-serve.yaml").read_text()))
    assert [d["kind"] for d in serve] == ["Deployment", "Service"]
    dep, svc = serve
    pod = dep["spec"]["template"]
    assert dep["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"] == svc["spec"]["selector"]
    c = pod["spec"]["containers"][0]
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    assert c["startupProbe"]["httpGet"]["path"] == "/health"
    # The service must listen where the probes and the Service point, on all interfaces.
    args = c["args"]
    assert args[0] == "serve" and args[args.index("--host") + 1] == "0.0.0.0"
    port = int(args[args.index("--port") + 1])
    assert c["ports"][0]["containerPort"] == port
    assert svc["spec"]["ports"][0]["targetPort"] == c["ports"][0]["name"]
    # SIGTERM drains for --drain seconds: the grace period must outlast it.
    assert pod["spec"]["terminationGracePeriodSeconds"] > int(args[args.index("--drain") + 1])
    # Every flag is one `tolk serve` knows (its --help lists them).
    help_text = subprocess.run([str(CLI), "serve", "--help"], capture_output=True, text=True).stdout
    for a in args[1:]:
        if a.startswith("-"):
            assert a in help_text, a

    (job,) = yaml.safe_load_all((ROOT / "examples/k8s/ray-translate-job.yaml").read_text())
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob"
    import ray

    assert job["spec"]["rayClusterSpec"]["rayVersion"] == ray.__version__
    entry = job["spec"]["entrypoint"].split()
    assert entry[:2] == ["python", "/app/examples/ray_translate.py"]
    a = rt.parser().parse_args(entry[2:])
    assert a.int8 and a.actors == 8 and a.threads == 2
