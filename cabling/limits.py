"""How large each kind of input may be before it is refused unread (the cap is in the message).

Each cap is the largest real input of its kind with room to spare, so a hostile file (a pull
request that a CI lint hook reads, a dump from a compromised host) costs seconds, not the runner:
past the cap the file is refused before it is parsed.
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024


@dataclass(frozen=True)
class Cap:
    """A size cap for one kind of input, and what the largest real one of that kind is."""

    what: str
    limit: int
    largest: str

    def describe(self) -> str:
        """``32 MiB, the cap for a manifest (the largest plan, ..., is 13 MiB)``."""
        return f"{self.limit // MiB} MiB, the cap for {self.what} ({self.largest})"


# The largest plan `provision cabling plan` makes at radix 64 (65,536 GPUs, 196,608 links) is a
# 13 MiB YAML manifest or a 22 MiB JSON one; its cable list is 17 MiB.
MANIFEST = Cap("a manifest", 32 * MiB, "the largest plan, 65,536 GPUs, is 13 MiB as YAML and 22 MiB as JSON")
CABLE_LIST = Cap("a CSV cable list", 32 * MiB, "the largest plan, 65,536 GPUs, is a 17 MiB cable list")
NDT = Cap("a UFM NDT file", 32 * MiB, "an NDT of 65,536 GPUs is about 15 MiB")
# A 100,000-GPU fabric's ibnetdiscover is about 60 MiB; iblinkinfo and ibqueryerrors are alike.
FABRIC_DUMP = Cap("a fabric tool's output", 128 * MiB, "a 100,000-GPU fabric's ibnetdiscover is about 60 MiB")
NODE_NAME_MAP = Cap("a node-name-map", 16 * MiB, "one line per node: 100,000 nodes is about 4 MiB")
# One host's or switch's lldpctl JSON is tens of KiB (a 64-port switch with every TLV a few hundred).
LLDP = Cap("one device's lldpctl output", 4 * MiB, "one 64-port switch with every TLV is under 1 MiB")
IBSTAT = Cap("one host's ibstat output", 1 * MiB, "one host's ibstat is a few KiB")
UFM = Cap("a UFM resource", 256 * MiB, "UFM's links of a 100,000-GPU fabric are about 200 MiB")

# Above this a JSON manifest that fails to load is reported by its JSON path alone: locating the
# line means parsing it again as YAML, which costs a second and 60 MiB for each MiB.
JSON_LINE_SEARCH_BYTES = 4 * MiB

# Integers in a manifest are port counts, rails, rack units and GUIDs written as numbers (at most
# 20 digits); longer digit runs are refused where they are read, naming the line.
MAX_INT_DIGITS = 24
