"""One MAC type: every spelling a peer or a site file uses parses to the same address."""

from __future__ import annotations

import pytest

from provisioner.bmc import redfish_parse as rp
from provisioner.bmc.base import NicPort
from provisioner.inventory.spec import normalise_mac
from provisioner.macaddr import canonical_mac, locally_administered, parse_mac
from provisioner.workflow.nic_choice import pinned_port


@pytest.mark.parametrize("text", ["aa:bb:cc:dd:ee:0f", "AA-BB-CC-DD-EE-0F", "aabb.ccdd.ee0f",
                                  "AABBCCDDEE0F", " aa:bb:cc:dd:ee:0f\n"])
def test_every_spelling_is_one_address(text):
    assert canonical_mac(text) == "aa:bb:cc:dd:ee:0f"
    assert rp.norm_mac(text) == "aa:bb:cc:dd:ee:0f"
    assert normalise_mac(text) == "aa:bb:cc:dd:ee:0f"
    # The site file's pinned MAC finds the port a BMC spelt another way.
    port = NicPort("1", rp.norm_mac("AA-BB-CC-DD-EE-0F") or "")
    assert pinned_port([port], text) is port


@pytest.mark.parametrize("junk", ["1:2:3:4:5:6", "aa:bb:cc:dd:ee", "aa:bb-cc:dd:ee:ff", "zz",
                                  "", "aabbccddeeff00", 0xAABBCCDDEEFF, None, ["aa:bb"]])
def test_what_no_peer_sends_is_no_mac(junk):
    assert parse_mac(junk) is None and rp.norm_mac(junk) is None


def test_the_all_zero_mac_bmcs_write_for_none_is_none():
    assert canonical_mac("00:00:00:00:00:00") == "00:00:00:00:00:00"
    assert rp.norm_mac("00:00:00:00:00:00") is None


def test_prefixes_keep_their_form_for_the_rule_validator():
    assert normalise_mac("52-54-00") == "52:54:00"
    assert normalise_mac("5254.00") == "52:54:00"


def test_locally_administered():
    for mac, local in (("ee:a3:ab:6b:53:03", True), ("02:00:5e:30:00:ff", True),
                       ("f4:4d:ad:02:27:62", False), ("d0:f4:05:43:95:04", False)):
        parsed = parse_mac(mac)
        assert parsed is not None and locally_administered(parsed) is local
        assert rp.locally_administered(mac) is local
