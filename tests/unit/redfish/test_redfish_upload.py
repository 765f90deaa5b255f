"""Push-update bodies (provisioner/redfish/upload.py) and RedfishClient.upload: the multipart
body as a real multipart parser (werkzeug's) reads it, streamed in bounded chunks, and the
client's transport rules (credentials only to the BMC, no redirect followed, host deadline,
typed errors) applied to the upload, against small HTTP servers on loopback."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from werkzeug.formparser import parse_form_data
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from provisioner.redfish.client import ClientOptions, RedfishClient
from provisioner.redfish.errors import BMCDeadline, BMCServerError, RedfishError
from provisioner.redfish.transport import host_deadline
from provisioner.redfish.upload import CHUNK, MultipartBody, UploadBody
from provisioner.secrets import Secret

PASSWORD = "upload-Canary-Pa55"


def _image(tmp_path: Path, size: int) -> Path:
    path = tmp_path / "fw image.bin"
    with path.open("wb") as fh:
        block = bytes(range(256)) * 4096
        while size > 0:
            fh.write(block[:size])
            size -= len(block)
    return path


def test_multipart_body_is_what_a_multipart_parser_reads(tmp_path):
    image = _image(tmp_path, 3 * CHUNK + 17)
    params = {"Targets": ["/redfish/v1/UpdateService/FirmwareInventory/BIOS"],
              "@Redfish.OperationApplyTime": "OnReset"}
    body = MultipartBody(image, [("UpdateParameters", params)])
    sizes = [len(chunk) for chunk in body.reopen()]
    assert max(sizes) <= CHUNK  # streamed: never more than a chunk of the image at a time
    raw = b"".join(body.reopen())
    assert len(raw) == len(body)
    environ = {"REQUEST_METHOD": "POST", "CONTENT_TYPE": body.content_type,
               "CONTENT_LENGTH": str(len(raw)), "wsgi.input": BytesIO(raw)}
    _stream, form, files = parse_form_data(environ)
    assert json.loads(form["UpdateParameters"]) == params
    upload = files["UpdateFile"]
    assert upload.filename == "fw image.bin"
    assert upload.mimetype == "application/octet-stream"
    assert hashlib.sha256(upload.read()).digest() == hashlib.sha256(image.read_bytes()).digest()
    assert b"".join(body.reopen()) == raw  # reopened, the same bytes again


def test_raw_body_streams_the_file(tmp_path):
    image = _image(tmp_path, CHUNK + 1)
    body = UploadBody(image)
    assert [len(c) for c in body.reopen()] == [CHUNK, 1] and len(body) == CHUNK + 1


@contextmanager
def _server(handler: Callable[[Request], Response]) -> Iterator[tuple[str, list[Any]]]:
    seen: list[Any] = []

    def app(environ, start_response):  # type: ignore[no-untyped-def]
        request = Request(environ)
        data = request.get_data()
        seen.append((request.method, request.path, dict(request.headers), data))
        return handler(request)(environ, start_response)

    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()


def _client(url: str) -> RedfishClient:
    client = RedfishClient(url, "admin", Secret(PASSWORD),
                           ClientOptions(prefer_session=False, timeout_s=2, retries=0))
    client._use_basic()
    return client


def test_upload_posts_the_stream_with_length_and_credentials_to_the_bmc(tmp_path):
    image = _image(tmp_path, CHUNK + 5)

    def accept(_r: Request) -> Response:
        return Response(json.dumps({"@odata.id": "/redfish/v1/TaskService/Tasks/7",
                                    "TaskState": "Running"}), status=202,
                        headers={"Location": "/redfish/v1/TaskService/Tasks/7"},
                        mimetype="application/json")

    with _server(accept) as (url, seen):
        body = MultipartBody(image, [("UpdateParameters", {"Targets": []})])
        reply = _client(url).upload("/redfish/v1/UpdateService/upload", body, timeout_s=5)
    assert reply.status == 202 and reply.header("location").endswith("/Tasks/7")
    (method, path, headers, data) = seen[0]
    assert (method, path) == ("POST", "/redfish/v1/UpdateService/upload")
    assert int(headers["Content-Length"]) == len(data) == len(body)
    assert "Transfer-Encoding" not in headers
    assert headers["Authorization"].startswith("Basic ")
    assert PASSWORD.encode() not in data


def test_upload_follows_no_redirect_and_sends_nothing_elsewhere(tmp_path):
    image = _image(tmp_path, 1000)
    with _server(lambda r: Response("{}", status=200)) as (elsewhere, other_seen):
        def redirect(_r: Request) -> Response:
            return Response("", status=307, headers={"Location": elsewhere + "/steal"})

        with _server(redirect) as (url, _seen), pytest.raises(RedfishError) as err:
            _client(url).upload("/push", UploadBody(image), timeout_s=5)
    assert err.value.status == 307
    assert other_seen == []  # neither the image nor the credentials went there


def test_upload_keeps_the_host_deadline_and_maps_errors(tmp_path):
    image = _image(tmp_path, 1000)
    with _server(lambda r: Response(json.dumps({"error": {"@Message.ExtendedInfo": [
            {"MessageId": "Update.1.0.ImageTooLarge", "Message": "too large"}]}}),
            status=500, mimetype="application/json")) as (url, seen):
        with host_deadline(0.0), pytest.raises(BMCDeadline):
            _client(url).upload("/push", UploadBody(image), timeout_s=5)
        assert seen == []
        with pytest.raises(BMCServerError) as err:
            _client(url).upload("/push", UploadBody(image), timeout_s=5)
    assert "ImageTooLarge" in err.value.message_ids()[0]
    assert len(seen) == 1  # a failed upload is not retried: the BMC may have taken it


def test_a_large_image_is_never_held_in_memory(tmp_path):
    import tracemalloc

    image = tmp_path / "big.bin"
    with image.open("wb") as fh:  # sparse: 64 MiB on disk costs nothing
        fh.truncate(64 * 1024 * 1024)
    got = hashlib.sha256()

    def sink(request: Request) -> Response:
        while chunk := request.stream.read(CHUNK):
            got.update(chunk)
        return Response(status=204)

    def app(environ, start_response):  # type: ignore[no-untyped-def]
        return sink(Request(environ))(environ, start_response)

    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tracemalloc.start()
    try:
        reply = _client(f"http://127.0.0.1:{server.server_port}").upload(
            "/upload", MultipartBody(image, [("UpdateParameters", {"Targets": []})]),
            timeout_s=30)
        _size, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        server.shutdown()
        server.server_close()
    assert reply.status == 204
    assert peak < 16 * 1024 * 1024, f"{peak} bytes held for a 64 MiB image"


def test_an_expired_session_is_renewed_once_and_the_image_sent_again(tmp_path):
    image = _image(tmp_path, 5000)
    tokens = iter(["t1", "t2"])
    valid: set[str] = set()

    def bmc(request: Request) -> Response:
        if request.path == "/redfish/v1/SessionService/Sessions":
            token = next(tokens)
            valid.add(token)
            return Response("{}", status=201, headers={
                "X-Auth-Token": token, "Location": f"/redfish/v1/SessionService/Sessions/{token}"},
                mimetype="application/json")
        if request.path.rstrip("/") == "/redfish/v1":
            return Response(json.dumps({"SessionService": {}, "Links": {"Sessions": {
                "@odata.id": "/redfish/v1/SessionService/Sessions"}}}), mimetype="application/json")
        if request.headers.get("X-Auth-Token") not in valid:
            return Response("{}", status=401, mimetype="application/json")
        return Response(status=204)

    with _server(bmc) as (url, seen):
        client = RedfishClient(url, "admin", Secret(PASSWORD),
                               ClientOptions(timeout_s=2, retries=0))
        client.login()
        valid.discard("t1")  # the BMC forgot the session (it rebooted, or timed it out)
        reply = client.upload("/push", UploadBody(image), timeout_s=5)
    assert reply.status == 204
    pushes = [(h.get("X-Auth-Token"), len(data)) for m, p, h, data in seen if p == "/push"]
    assert pushes == [("t1", 5000), ("t2", 5000)]  # the whole image again, new session
