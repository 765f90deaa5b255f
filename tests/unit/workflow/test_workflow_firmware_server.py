"""The firmware image server of `provision firmware update`: its listener on a port in use."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from provisioner.exceptions import NotReady
from provisioner.inventory.spec import FirmwareServerSettings
from provisioner.workflow.firmware_images import ImageCache, serve_images


def test_a_port_in_use_is_a_typed_error_not_an_exit(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = FirmwareServerSettings(url=f"http://127.0.0.1:{port}", listen="127.0.0.1")
        # werkzeug's own server prints and calls sys.exit(1) here
        with pytest.raises(NotReady, match=f"127.0.0.1:{port}"), \
                serve_images(settings, ImageCache(tmp_path)):
            pass
