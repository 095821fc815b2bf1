"""The server's replies against docs/api.yaml: each reply validated against the schema the
document gives for its path, method and status."""

import json
import os
import secrets

import jsonschema
import pytest
import yaml


PY = "/usr/bin/python3"


@pytest.fixture(scope="module")
def document():
    with open(os.environ.get("SMOLBOX_API_DOC", os.path.join(os.path.dirname(__file__), "../../../docs/api.yaml"))) as f:
        return yaml.safe_load(f)


def check(document, schema_ref, instance):
    """Validates instance against a schema of the document, its $refs resolved in it."""
    root = {"$ref": schema_ref, "components": document["components"]}
    jsonschema.Draft202012Validator(root).validate(instance)


def reply_schema(document, path, method, status, content_type="application/json"):
    response = document["paths"][path][method]["responses"][str(status)]
    if "$ref" in response:
        response = document["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    schema = response["content"][content_type]["schema"]
    return schema


def raw(client, method, path, body=None, content_type="application/json"):
    conn = client._connect()
    data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
    conn.request(method, path, body=data, headers={"Content-Type": content_type} if body is not None else {})
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response.status, response.getheader("Content-Type", ""), payload


def validate(document, path_template, method, status, body, content_type="application/json"):
    schema = reply_schema(document, path_template, method, status, content_type)
    root = dict(schema)
    root["components"] = document["components"]
    jsonschema.Draft202012Validator(root).validate(body)


def test_the_document_is_openapi_3_1_and_every_ref_resolves(document):
    assert document["openapi"].startswith("3.1")
    text = json.dumps(document)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "')[1:]}:
        node = document
        for key in ref.lstrip("#/").split("/"):
            node = node[key]
        assert node, ref
    for name, schema in document["components"]["schemas"].items():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_replies_match_the_document(document, server):
    client = server.client()
    status, _, body = raw(client, "GET", "/v1/health")
    validate(document, "/v1/health", "get", status, json.loads(body))

    spec = {"backend": "ns", "argv": [PY, "-c", "print(1)"]}
    status, _, body = raw(client, "POST", "/v1/run", spec)
    assert status == 200
    validate(document, "/v1/run", "post", 200, json.loads(body))
    for bad, code in (({"argv": [PY], "bogus": 1}, 400), ({"argv": [PY], "limits": {"memory_mib": 1}}, 400)):
        status, _, body = raw(client, "POST", "/v1/run", bad)
        assert status == code
        validate(document, "/v1/run", "post", code, json.loads(body))
    # The request schemas accept what the server accepts.
    check(document, "#/components/schemas/RunSpec", spec)

    status, _, body = raw(client, "POST", "/v1/sandboxes", {"backend": "ns"})
    assert status == 201
    created = json.loads(body)
    validate(document, "/v1/sandboxes", "post", 201, created)
    sandbox = f"/v1/sandboxes/{created['id']}"
    status, _, body = raw(client, "GET", "/v1/sandboxes")
    validate(document, "/v1/sandboxes", "get", status, json.loads(body))
    status, _, body = raw(client, "GET", sandbox)
    validate(document, "/v1/sandboxes/{id}", "get", status, json.loads(body))

    exec_request = {"argv": [PY, "-c", "import sys; print('out'); sys.stderr.write('err')"], "timeout_ms": 5000}
    check(document, "#/components/schemas/ExecRequest", exec_request)
    status, content_type, body = raw(client, "POST", sandbox + "/exec", exec_request)
    assert status == 200 and content_type.startswith("application/x-ndjson")
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert lines[-1]["type"] == "result"
    for line in lines:
        validate(document, "/v1/sandboxes/{id}/exec", "post", 200, line, "application/x-ndjson")
    status, _, body = raw(client, "POST", sandbox + "/exec", {"argv": "x"})
    assert status == 400
    validate(document, "/v1/sandboxes/{id}/exec", "post", 400, json.loads(body))

    status, _, body = raw(client, "PUT", sandbox + "/files/work/x.bin", b"\x00\xff", "application/octet-stream")
    assert status == 201
    validate(document, "/v1/sandboxes/{id}/files/{path}", "put", 201, json.loads(body))
    status, content_type, body = raw(client, "GET", sandbox + "/files/work/x.bin")
    assert (status, content_type, body) == (200, "application/octet-stream", b"\x00\xff")
    for method, path, code in (("GET", "/files/work/none", 404), ("GET", "/files/work", 409),
                               ("PUT", "/files/work//x", 400)):
        status, _, body = raw(client, method, sandbox + path, b"x" if method == "PUT" else None,
                              "application/octet-stream")
        assert status == code, body
        validate(document, "/v1/sandboxes/{id}/files/{path}", method.lower(), code, json.loads(body))

    status, _, body = raw(client, "DELETE", sandbox)
    validate(document, "/v1/sandboxes/{id}", "delete", status, json.loads(body))
    status, _, body = raw(client, "GET", sandbox)
    assert status == 404
    validate(document, "/v1/sandboxes/{id}", "get", 404, json.loads(body))


def test_a_reply_that_breaks_the_document_is_caught(document):
    """The validation can fail: a result missing a field, or with one the document lacks."""
    result = {"status": "exited", "exit_code": 0}
    with pytest.raises(jsonschema.ValidationError):
        validate(document, "/v1/run", "post", 200, result)
    with pytest.raises(jsonschema.ValidationError):
        validate(document, "/v1/health", "get", 200, {"status": "ok", "sandboxes": 0, "execs_running": 0,
                                                      "extra": secrets.token_hex(4)})
