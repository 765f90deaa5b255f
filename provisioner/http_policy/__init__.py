"""The policy every outbound HTTP client of the project follows (Redfish, MAAS, Ironic,
image fetches), whatever its peer answers.

- ``session.GuardedSession``: a ``requests.Session`` bound to one origin. Redirects are
  followed only within that origin (``upgrade_to_https`` also allows the same host's https
  port); the environment's proxies and ``.netrc`` are never read (``HttpPolicy.proxy`` names
  a proxy when a site wants one).
- ``adapter.GuardedAdapter``: the same rules as a transport adapter, for a session the
  project does not create (mount it, or hand it to a library's adapter hook): nothing is
  sent off the origin, every answer is read under a size cap, a wall time per answer and the
  caller's deadline.
- ``deadline``: one deadline for all the requests made in a context (a host's whole
  conversation); a trickling answer cannot extend it.
- ``jsonlimits``: JSON no real peer sends (too deep, huge numbers, NaN) is refused.
- ``logsafe``: passwords and tokens never reach a log record or an error message.

Every refusal is a :class:`errors.HttpRefused` naming the URL without user info; each client
maps it to its own typed error. Submodules are imported by name (this package imports
nothing), so a light import of ``logsafe`` does not load ``requests``.
"""
