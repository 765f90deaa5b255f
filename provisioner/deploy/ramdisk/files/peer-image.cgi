#!/bin/sh
# Peer serving: busybox httpd runs this for GET /cgi-bin/image?t=<ticket> while deploy.sh serves
# this host's verified image to other hosts being deployed. The deploy server hands each waiting
# host a ticket bound to that host's address (sha256 of this host's peer key and the address),
# so only a host the server sent here gets the image. The bytes come straight from the root
# disk: deploy.sh serves before it grows the partition, while the disk still holds the image.
# shellcheck disable=SC1090 # written by deploy.sh: PEER_KEY PEER_DISK IMAGE_SIZE
. "${PEER_ENV:-/tmp/peer/env}"
# busybox httpd listening on every address (IPv4 and IPv6) gives "[::ffff:10.0.0.5]"
addr=${REMOTE_ADDR#"["}
addr=${addr%"]"}
addr=${addr#::ffff:}
want=$(printf '%s:%s' "$PEER_KEY" "$addr" | sha256sum | cut -d' ' -f1)
if [ "${REQUEST_METHOD:-}" != GET ] || [ "${QUERY_STRING:-}" != "t=$want" ]; then
  printf 'Status: 403 Forbidden\r\nContent-Type: text/plain\r\n\r\nno valid ticket for %s\n' "$addr"
  exit 0
fi
printf 'Content-Type: application/octet-stream\r\nContent-Length: %s\r\nCache-Control: no-store\r\n\r\n' "$IMAGE_SIZE"
exec head -c "$IMAGE_SIZE" "$PEER_DISK"
