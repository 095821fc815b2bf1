"""The Python SDK against a real server on the ns backend."""

import os
import secrets
import subprocess
import threading
import time

import pytest

import smolbox
from conftest import Server

PY = "/usr/bin/python3"


def test_run_returns_a_typed_result(client):
    token = secrets.token_hex(8)
    result = smolbox.run([PY, "-c", "import sys; print(sys.argv[1]); sys.exit(3)", token], backend="ns", client=client)
    assert isinstance(result, smolbox.Result)
    assert result.status == "exited"
    assert result.exit_code == 3
    assert result.stdout == token + "\n"
    assert not result.ok
    assert result.backend == "ns"
    assert isinstance(result.usage, smolbox.Usage) and result.usage.wall_ms >= 0


def test_an_entrypoint_or_a_command_given_as_a_string_is_one_word(client):
    result = smolbox.run(["-c", "print('front')"], entrypoint=PY, backend="ns", client=client)
    assert result.stdout == "front\n"
    assert smolbox.run("/bin/true", backend="ns", client=client).exit_code == 0


def test_stdin_and_env_reach_the_workload(client):
    result = smolbox.run([PY, "-c", "import os; print(input()[::-1], os.environ['K'])"], stdin="abc\n",
                         env={"K": "v"}, backend="ns", client=client)
    assert result.stdout == "cba v\n"


@pytest.mark.parametrize("code, options, error, limit", [
    ("while True: pass", {"timeout": 1}, smolbox.TimeoutExceeded, "timeout"),
    ("while True: pass", {"cpu_time": 0.5}, smolbox.CpuLimitExceeded, "cpu"),
    ("held = [bytearray(1 << 20) for _ in range(512)]", {"memory_mib": 64}, smolbox.MemoryLimitExceeded, "memory"),
    ("import sys\nfor _ in range(20): sys.stdout.write('x' * (1 << 20))", {"output_bytes": 65536},
     smolbox.OutputLimitExceeded, "output"),
])
def test_a_limit_hit_raises_an_exception_naming_it(client, code, options, error, limit):
    with pytest.raises(error) as raised:
        smolbox.run([PY, "-c", code], backend="ns", client=client, **options)
    assert raised.value.limit == limit
    assert isinstance(raised.value, smolbox.LimitExceeded)
    assert raised.value.result.status != "exited"
    # Without check, the same run is a result to inspect.
    result = smolbox.run([PY, "-c", code], backend="ns", client=client, check=False, **options)
    assert result.status == raised.value.result.status


def test_a_bad_request_raises_an_api_error_naming_the_field(client):
    with pytest.raises(smolbox.ApiError) as raised:
        smolbox.run([PY, "-c", "1"], memory_mib=1, client=client)
    assert raised.value.status == 400
    assert raised.value.field == "limits.memory_mib"
    with pytest.raises(TypeError):
        smolbox.run([PY], memory=64, client=client)


# prewarm reaches the server: here on ns, which has no prewarm, and in a run, which has one exec.
# The vm backend's prewarmed sandbox over the API is ApiPrewarm's (sandbox/tests/api).
def test_prewarm_is_passed_on_and_refused_where_it_has_no_meaning(client):
    with pytest.raises(smolbox.ApiError) as raised:
        smolbox.Sandbox.create(prewarm="python", backend="ns", client=client)
    assert (raised.value.status, raised.value.field) == (400, "prewarm")
    assert "vm backend" in raised.value.reason
    with pytest.raises(smolbox.ApiError) as raised:
        smolbox.run([PY, "-c", "1"], prewarm="python", client=client)
    assert (raised.value.status, raised.value.field) == (400, "prewarm")
    assert "created sandbox" in raised.value.reason


def test_a_sandbox_keeps_state_across_execs_and_is_removed_on_exit(client):
    with smolbox.Sandbox.create(backend="ns", memory_mib=128, env={"KEPT": "yes"}, client=client) as sb:
        sb.exec([PY, "-c", "open('/work/n', 'w').write('seven')"])
        result = sb.exec([PY, "-c", "import os; print(open('/work/n').read(), os.environ['KEPT'])"])
        assert result.stdout == "seven yes\n"
        assert sb.status()["status"] == "running"
        sandbox_id = sb.id
    with pytest.raises(smolbox.ApiError) as raised:
        client.request("GET", f"/v1/sandboxes/{sandbox_id}")
    assert raised.value.status == 404
    listed = subprocess.run([os.environ["SMOLBOX"], "ls", "--json"], capture_output=True, text=True).stdout
    assert sandbox_id not in listed


def test_files_go_in_and_come_out_byte_for_byte(client):
    data = bytes(range(256)) * 16
    with smolbox.Sandbox.create(backend="ns", client=client) as sb:
        assert sb.files.write("/work/in/data.bin", data)["bytes"] == len(data)
        assert sb.files.read("/work/in/data.bin") == data
        sb.files.write("/work/rows.csv", "a,b\n1,2\n")
        result = sb.exec([PY, "-c", "import csv; rows = list(csv.DictReader(open('/work/rows.csv')))\n"
                          "open('/work/out.txt', 'w').write(rows[0]['b'])"])
        assert result.ok
        assert sb.files.read_text("/work/out.txt") == "2"
        with pytest.raises(smolbox.ApiError) as raised:
            sb.files.read("/work/missing")
        assert raised.value.status == 404 and raised.value.field == "path"
        with pytest.raises(ValueError):
            sb.files.read("relative/path")


def test_an_exec_streams_output_to_a_callback_as_it_comes(client):
    seen = []
    with smolbox.Sandbox.create(backend="ns", client=client) as sb:
        started = time.monotonic()
        result = sb.exec([PY, "-c", "import sys, time\nprint('a', flush=True)\ntime.sleep(2)\n"
                          "sys.stderr.write('b\\n')"],
                         on_output=lambda event: seen.append((time.monotonic() - started, event)))
        total = time.monotonic() - started
    assert [e.data for _, e in seen] == ["a\n", "b\n"]
    assert [e.stream for _, e in seen] == ["stdout", "stderr"]
    assert seen[0][0] < total - 1.5, "the first output came only with the end"
    assert result.stdout == "a\n" and result.stderr == "b\n"


def test_an_exec_limit_raises_and_the_sandbox_lives_on(client):
    with smolbox.Sandbox.create(backend="ns", client=client) as sb:
        with pytest.raises(smolbox.TimeoutExceeded):
            sb.exec([PY, "-c", "while True: pass"], timeout=1)
        assert sb.exec([PY, "-c", "print(1)"]).stdout == "1\n"


def test_closing_an_exec_iterator_ends_the_workload(client):
    token = secrets.token_hex(8)
    with smolbox.Sandbox.create(backend="ns", client=client) as sb:
        events = sb.exec_iter([PY, "-c", "import sys, time\nwhile True: print(sys.argv[1], flush=True); "
                               "time.sleep(0.1)", token], timeout=600)
        first = next(events)
        assert first.data == token + "\n"
        events.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and token in _process_lines():
            time.sleep(0.1)
        assert token not in _process_lines()
        assert sb.exec([PY, "-c", "print(2)"]).stdout == "2\n"


def test_a_tcp_server_needs_the_token(tmp_path):
    token = secrets.token_hex(16)
    token_file = tmp_path / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    tcp = Server("--token-file", str(token_file), listen="tcp:127.0.0.1:0")
    try:
        url = "http://" + tcp.address[len("tcp:"):]
        with pytest.raises(smolbox.ApiError) as raised:
            smolbox.Client(url, token="").health()
        assert raised.value.status == 401
        assert raised.value.field == "Authorization"
        assert smolbox.Client(url, token=token).health()["status"] == "ok"
    finally:
        tcp.stop()


def test_threads_can_share_a_client(client):
    results = {}

    def work(n):
        results[n] = smolbox.run([PY, "-c", f"print({n} * {n})"], backend="ns", client=client).stdout

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {n: f"{n * n}\n" for n in range(6)}


def _process_lines():
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    out.append(f.read().replace(b"\0", b" ").decode("utf-8", "replace"))
            except OSError:
                pass
    return "\n".join(out)


def test_a_busy_server_is_retried_within_retry_for_and_refused_without_it():
    # One slot and no queue: a second run meanwhile is refused with 429 and Retry-After.
    busy = Server("--max-concurrent-execs", "1", "--max-queued", "0")
    try:
        holder = threading.Thread(target=lambda: smolbox.run([PY, "-c", "import time; time.sleep(2)"], backend="ns",
                                                              client=busy.client()))
        holder.start()
        _wait_for_running(busy.client(), 1)
        with pytest.raises(smolbox.ApiError) as raised:
            smolbox.run([PY, "-c", "print(1)"], backend="ns", client=busy.client(retry_for=0))
        assert raised.value.status == 429
        assert raised.value.field == "max_queued"
        assert raised.value.retry_after == 1.0
        # The same run with retries waits out the holder and gets its result.
        started = time.monotonic()
        result = smolbox.run([PY, "-c", "print('after retries')"], backend="ns", client=busy.client())
        assert result.stdout == "after retries\n"
        assert time.monotonic() - started < 30
        holder.join()
    finally:
        busy.stop()


def _wait_for_running(client, n):
    deadline = time.monotonic() + 30
    while client.health()["execs_running"] != n:
        assert time.monotonic() < deadline, "the holder never started"
        time.sleep(0.05)


def test_a_ca_bundle_joins_the_sandboxs_trust_store(client, tmp_path):
    subprocess.run(["/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", "/CN=sdk test CA", "-keyout", str(tmp_path / "key.pem"),
                    "-out", str(tmp_path / "ca.pem")], check=True, capture_output=True)
    pem = (tmp_path / "ca.pem").read_text()
    code = "import os; print(open(os.environ['SSL_CERT_FILE']).read().endswith(os.environ['PEM']))"
    result = smolbox.run([PY, "-c", code], backend="ns", ca_bundle=pem, env={"PEM": pem}, client=client)
    assert result.stdout == "True\n"
    with pytest.raises(smolbox.ApiError) as raised:
        smolbox.run([PY, "-c", "1"], backend="ns", ca_bundle=(tmp_path / "key.pem").read_text(), client=client)
    assert raised.value.status == 400
    assert raised.value.field == "ca_bundle"
