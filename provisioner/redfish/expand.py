"""``$expand`` on Redfish collections: which query a service takes, and whether its answer
really is the collection's members.

DSP0266 (Redfish specification, "Query parameters"): the service root's
``ProtocolFeaturesSupported.ExpandQuery`` says which forms a service takes. ``.`` expands the
subordinate references (a collection's ``Members``) and needs ``NoLinks``; ``*`` expands every
reference and needs ``ExpandAll``; ``~`` expands only the ``Links`` section, which never holds
``Members``, so it is no use here. ``($levels=1)`` needs ``Levels``; without it a bare ``.`` or
``*`` means one level. BMCs get this wrong in many ways (an error, the plain collection, members
cut off, bodies of other resources), so an answer is checked before it is trusted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Properties every reference may carry; anything else means the member's body is inline.
_REFERENCE_KEYS = frozenset({"@odata.id", "@odata.type", "@odata.etag", "@odata.context"})


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def expand_query(root: dict[str, Any]) -> str:
    """The ``$expand`` value to read a collection's members with; ``''`` when not offered."""
    expand = _obj(_obj(root.get("ProtocolFeaturesSupported")).get("ExpandQuery"))
    if expand.get("NoLinks") is True:
        token = "."
    elif expand.get("ExpandAll") is True:
        token = "*"
    else:
        return ""
    max_levels = expand.get("MaxLevels")
    levels_ok = expand.get("Levels") is True and (
        not isinstance(max_levels, int) or isinstance(max_levels, bool) or max_levels >= 1)
    return f"{token}($levels=1)" if levels_ok else token


def norm_link(path: str) -> str:
    """A resource link without fragment, query or trailing slash (how members are compared)."""
    return path.split("#", 1)[0].split("?", 1)[0].rstrip("/")


@dataclass
class Expanded:
    """What an expanded collection answer gave: member bodies and members listed bare."""

    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)  # @odata.id -> body
    order: list[str] = field(default_factory=list)  # every member's @odata.id, as listed
    bare: list[str] = field(default_factory=list)  # listed without a body: read each


def member_link(member: Any) -> str | None:
    """A Members entry's ``@odata.id``, or None when it is not a reference."""
    link = member.get("@odata.id") if isinstance(member, dict) else None
    return link if isinstance(link, str) and link else None


def check_expanded(body: dict[str, Any], collection: str, *, whole: bool = True
                   ) -> Expanded | str:
    """The members of an expanded answer for ``collection``, or why it cannot be trusted.

    Refused (the caller reads member by member instead): an answer that is not this
    collection, a member outside it (bodies from another collection), duplicate members, a
    ``Members@odata.count`` that disagrees with the list (cut off), a body without its ``Id``
    (cut short), or a next page; the last
    two are accepted when not the ``whole`` collection is wanted (bodies to look up). A member
    listed with no body is kept as a link to read on its own, so nothing listed is lost.
    """
    base = norm_link(collection)
    own = body.get("@odata.id")
    if isinstance(own, str) and norm_link(own) != base:
        return f"answered {own!r}, not the collection"
    members = body.get("Members")
    if not isinstance(members, list):
        return "no Members list"
    if whole and body.get("Members@odata.nextLink"):
        return "paged (Members@odata.nextLink)"
    count = body.get("Members@odata.count")
    if whole and isinstance(count, int) and not isinstance(count, bool) \
            and count != len(members):
        return f"lists {len(members)} of {count} members"
    out = Expanded()
    seen: set[str] = set()
    for index, member in enumerate(members):
        link = member_link(member)
        if link is None:
            return f"Members[{index}] is not a reference"
        norm = norm_link(link)
        if not norm.startswith(base + "/"):
            return f"Members[{index}] {link!r} is not a member of {collection}"
        if norm in seen:
            return f"Members[{index}] {link!r} is listed twice"
        seen.add(norm)
        out.order.append(link)
        if set(member) - _REFERENCE_KEYS:
            if not isinstance(member.get("Id"), str):
                # Every resource has an Id: AMI BMCs (DGX H100, GB300) drop it, with Name
                # and ChassisType, from expanded bodies, which are then not to be trusted.
                return f"Members[{index}] {link!r} has a body without its Id (cut short)"
            out.bodies[norm] = member
        else:
            out.bare.append(link)
    return out
