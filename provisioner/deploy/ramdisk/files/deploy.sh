#!/bin/sh
# Image deploy, run by the ramdisk's init with the host's one-time configuration:
# pick the root disk by its hint, stream the image onto it while hashing it (all but its first
# MiB, which waits in RAM), verify the size and sha256, then write the first MiB (peer serving:
# serve it to other hosts while the server wants it), grow the root partition and filesystem,
# write the cloud-init NoCloud seed, report, then power off or kexec the installed OS.
# Only the chosen disk is written: data disks are never touched. Nothing on the chosen disk can
# boot, or be found as partitions, until the image verified: its first and last MiB are zeroed
# when the first stream begins, the image's own first MiB goes on last, nothing is written past
# IMAGE_SIZE, and a deploy that fails clears what its streams wrote.
set -u
# DEPLOY_TOKEN CALLBACK_URL IMAGE_URL IMAGE_SHA256 IMAGE_SIZE ROOT_PART SEED_URL HINT_ARGS
# IMAGE_WAIT_S IMAGE_RETRY_S IMAGE_ATTEMPTS PEER_PORT PEER_KEY PEER_URL PEER_MAX_S NEXT_BOOT
# POST_TRIES (tries of a report or a seed document, default 6)
. "$1"
LOG=${DEPLOY_LOG:-/tmp/deploy.log}
DEV=${DEVDIR:-/dev}   # overridable, like pick-disk.sh's, so tests can run this on a fake disk
TMP=${TMPDIR:-/tmp}
SYS=${SYSFS:-/sys}
: > "$LOG"
log() { echo "deploy: $*" | tee -a "$LOG"; }
# ask OUT URL [WGET-ARGS]: a request to the server with the token. A lost report or seed costs
# the host a whole attempt (the server waits callback_timeout_s, then a power cycle and a POST):
# a broken connection or a 5xx (the server's connection limit) is tried again, up to POST_TRIES
# times over about 15 s; a 4xx answer (a replay, a bad token) is final.
ask() {
  ask_out=$1 ask_url=$2
  shift 2
  asks=0
  until wget -q -S -O "$ask_out" --header "Authorization: Bearer $DEPLOY_TOKEN" "$@" "$ask_url" \
      2>"$TMP/ask.err"; do
    asks=$((asks + 1))
    if grep -q '^ *HTTP/[0-9.]* 4' "$TMP/ask.err" || [ "$asks" -ge "${POST_TRIES:-6}" ]; then
      return 1
    fi
    sleep "$asks"
  done
}
asked() { grep -m1 '^ *HTTP/' "$TMP/ask.err" || tail -1 "$TMP/ask.err"; }  # why ask failed
post() {
  ask /dev/null "$CALLBACK_URL/$1" --post-file "$2" || echo "deploy: callback $1 failed: $(asked)"
}
fail() {
  log "FAILED: $*"
  post failed "$LOG"
  echo "deploy: reported the failure; waiting for the orchestrator to power this host off"
  [ -n "${DEPLOY_NO_SHELL:-}" ] && exit 1   # tests: no console to hand over
  exec setsid cttyhack sh
}
partdev() { case "$1" in *[0-9]) echo "/dev/${1}p$2" ;; *) echo "/dev/$1$2" ;; esac; }
wait_dev() { i=0; while [ ! -b "$1" ] && [ "$i" -lt 50 ]; do sleep 0.2; i=$((i + 1)); done; [ -b "$1" ]; }

echo "ramdisk up: $(uname -r)" > $TMP/started
post started $TMP/started

# shellcheck disable=SC2086 # HINT_ARGS is a pre-quoted argument list
eval "set -- $HINT_ARGS"
disk=$(sh "${PICK_DISK:-/pick-disk.sh}" "$@" 2>$TMP/pick.err) || { cat $TMP/pick.err >> "$LOG"; fail "$(head -1 $TMP/pick.err)"; }
cat $TMP/pick.err >> "$LOG"
log "root disk: /dev/$disk ($(cat "$SYS/block/$disk/size") sectors)"

MiB=1048576
disk_bytes=$(( $(cat "$SYS/block/$disk/size") * 512 ))
case "${IMAGE_SIZE:-}" in
  ''|*[!0-9]*) fail "the one-time configuration has no image size (IMAGE_SIZE='${IMAGE_SIZE:-}'); the ramdisk and the deploy server do not match" ;;
esac
[ "$IMAGE_SIZE" -gt 0 ] && [ "$IMAGE_SIZE" -le "$disk_bytes" ] \
  || fail "the image ($IMAGE_SIZE bytes) does not fit /dev/$disk ($disk_bytes bytes)"
head_len=$(( IMAGE_SIZE < MiB ? IMAGE_SIZE : MiB ))  # the part of the image kept in RAM
reached=0  # how far into the disk the streams wrote: what a failed deploy clears
rm -f $TMP/touched

# unbootable DISK: zero the first MiB (MBR and boot code, the GPT header and table) and the last
# (the backup GPT that UEFI firmware and the kernel fall back to when the first is gone).
unbootable() {
  dd if=/dev/zero of="$1" bs=$MiB count=1 conv=notrunc,fsync 2>/dev/null \
    && dd if=/dev/zero of="$1" bs=$MiB seek=$(( disk_bytes / MiB - 1 )) count=1 \
      conv=notrunc,fsync 2>/dev/null
}

# write_image DISK, reading the stream (capped at IMAGE_SIZE + 1 bytes): its first head_len
# bytes to RAM, then (once they all came: a busy answer or a short stream leaves the disk as it
# was) the disk made unbootable and the rest streamed onto it from head_len up to IMAGE_SIZE.
# A byte past the image is drained, never written: the caller sees it in the count.
write_image() {
  dd of=$TMP/head.img bs=64k count=$head_len iflag=count_bytes,fullblock 2>/dev/null || return 1
  [ "$(wc -c < $TMP/head.img)" -eq "$head_len" ] || return 1
  unbootable "$1" || return 1
  : > $TMP/touched
  dd of="$1" bs=4M seek=$head_len oflag=seek_bytes count=$(( IMAGE_SIZE - head_len )) \
    iflag=count_bytes,fullblock conv=notrunc,fsync 2>>"$LOG" || return 1
  cat > /dev/null
}

# clear_written DISK: a deploy that fails leaves nothing of its streams: the first and last MiB
# zero (never the image's) and the range the streams wrote zeroed. Takes the disk's write time
# over that range, before the failure is reported (the orchestrator powers the host off then).
clear_written() {
  [ -e $TMP/touched ] || return 0
  log "clearing the ${reached} bytes the image streams wrote to /dev/$disk"
  unbootable "$1"
  [ "$reached" -gt "$head_len" ] && dd if=/dev/zero of="$1" bs=4M seek=$head_len oflag=seek_bytes \
    count=$(( reached - head_len )) iflag=count_bytes conv=notrunc,fsync 2>/dev/null
  rm -f $TMP/touched $TMP/head.img
}

# The server admits a limited number of image streams at once. A request beyond them waits in
# the server (a long poll, its FIFO ticket queued) and gets the next stream the moment one is
# released; when the hold runs out the server answers "503 Stream Queue Hold Expired" and we ask
# again at once (the ticket keeps its place). A plain 503 (the server's hold slots are full, or
# an older server) means: wait and ask again. busybox wget (1.35) prints only the status line of
# an error response, not its headers, so Retry-After cannot be read here: the wait is
# IMAGE_RETRY_S from the per-host config (the server's Retry-After value), or a Retry-After a
# wget that prints headers showed, plus a jitter of up to 50% so that refused hosts do not retry
# in lockstep. A 503 carries no body: nothing is written to the disk before the stream is
# admitted (dd's notrunc keeps a busy answer from truncating a target that is a plain file).
# Gives up after IMAGE_WAIT_S seconds of busy answers.
stream_image() {  # $1: target device; 0 streamed and hashed, 1 failed, 2 waited too long
  waited_since=$(date +%s)
  limit=${IMAGE_WAIT_S:-7200}
  busy=0
  while :; do
    rm -f $TMP/sum.fifo $TMP/count.fifo $TMP/head.img
    mkfifo $TMP/sum.fifo $TMP/count.fifo
    sha256sum < $TMP/sum.fifo > $TMP/sum &
    hasher=$!
    wc -c < $TMP/count.fifo > $TMP/count &
    counter=$!
    set -o pipefail
    wget -q -S -O - "$IMAGE_URL" 2>$TMP/wget.err | head -c $(( IMAGE_SIZE + 1 )) \
      | tee $TMP/sum.fifo $TMP/count.fifo | write_image "$1"
    streamed=$?
    set +o pipefail
    wait "$hasher" "$counter"
    got_bytes=$(tr -d ' ' < $TMP/count)
    if [ -e $TMP/touched ]; then
      wrote=$(( got_bytes < IMAGE_SIZE ? got_bytes : IMAGE_SIZE ))
      [ "$wrote" -gt "$reached" ] && reached=$wrote
    fi
    # a stream longer than the image ends at the cap (its sender may see a broken pipe): judged
    # by its size like a complete one
    if [ "$streamed" -eq 0 ] || [ "${got_bytes:-0}" -gt "$IMAGE_SIZE" ]; then
      [ "$busy" -gt 0 ] && log "image stream admitted after $busy busy answer(s), $(( $(date +%s) - waited_since )) s"
      return 0
    fi
    if ! grep -q '^ *HTTP/[0-9.]* 503' $TMP/wget.err; then
      grep -v '^  ' $TMP/wget.err >> "$LOG"
      return 1
    fi
    busy=$((busy + 1))
    elapsed=$(( $(date +%s) - waited_since ))
    if grep -q '^ *HTTP/[0-9.]* 503 Stream Queue Hold Expired' $TMP/wget.err; then
      [ "$elapsed" -lt "$limit" ] || return 2
      [ "$busy" -eq 1 ] && log "image streams busy: queued at the server, up to ${limit}s"
      continue
    fi
    after=$(sed -n 's/^ *[Rr][Ee][Tt][Rr][Yy]-[Aa][Ff][Tt][Ee][Rr]: *\([0-9][0-9]*\).*/\1/p' $TMP/wget.err | tail -1)
    after=${after:-${IMAGE_RETRY_S:-1}}
    jitter=$(( $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % ((after + 1) / 2 + 1) ))
    [ $((elapsed + after + jitter)) -le "$limit" ] || return 2
    [ "$busy" -eq 1 ] && log "image streams busy (503): retrying every ${after}s (+jitter), up to ${limit}s"
    sleep $((after + jitter))
  done
}

# A stream that breaks or does not verify is streamed again from this ramdisk (its retry
# queues ahead of first attempts at the server), up to IMAGE_ATTEMPTS times in all: cheaper
# than failing the attempt, which costs the orchestrator a power cycle and a POST.
# A stream that came from a peer (the server's 307) and failed counts against the peer, not
# this host: the server drops that peer when we ask again, and it costs no attempt (3 at most).
tries=${IMAGE_ATTEMPTS:-2}
n=1
peer_fails=0
while :; do
  log "streaming $IMAGE_URL to /dev/$disk"
  stream_image "$DEV/$disk"
  rc=$?
  from_peer=$(grep -c '^ *[Ll]ocation:' $TMP/wget.err 2>/dev/null)
  case $rc in
    0)
      got=$(cut -d' ' -f1 $TMP/sum)
      if [ "$got_bytes" -gt "$IMAGE_SIZE" ]; then
        why="the image stream was longer than the image's $IMAGE_SIZE bytes (nothing past them was written)"
      elif [ "$got_bytes" -lt "$IMAGE_SIZE" ]; then
        why="the image stream ended after $got_bytes of the image's $IMAGE_SIZE bytes"
      elif [ "$got" = "$IMAGE_SHA256" ]; then
        break
      else
        why="image sha256 mismatch: expected $IMAGE_SHA256, got $got"
      fi ;;
    2) clear_written "$DEV/$disk"
       fail "the deploy server's image streams stayed busy (503) for over ${IMAGE_WAIT_S:-7200}s; raise settings.embedded.max_image_streams or image_wait_s, or deploy fewer hosts at once (--max-parallel)" ;;
    *) why="download or write of the image failed" ;;
  esac
  if [ "${from_peer:-0}" -gt 0 ] && [ "$peer_fails" -lt 3 ]; then
    peer_fails=$((peer_fails + 1))
    log "$why (from a peer); asking the server again"
    continue
  fi
  [ "$n" -lt "$tries" ] || { clear_written "$DEV/$disk"; fail "$why"; }
  n=$((n + 1))
  log "$why; streaming the image again ($n/$tries)"
done
# the image verified: its first MiB (partition table, boot code) goes on last
dd if=$TMP/head.img of="$DEV/$disk" bs=$MiB conv=notrunc,fsync 2>>"$LOG" \
  || { clear_written "$DEV/$disk"; fail "writing the image's first MiB to /dev/$disk failed"; }
rm -f $TMP/head.img $TMP/touched
log "sha256 verified: $got"
if [ "${from_peer:-0}" -gt 0 ]; then  # the peer's address only: the ticket stays out of logs
  log "the image came from peer $(sed -n 's|^ *[Ll]ocation: *http://\([^/]*\)/.*|\1|p' $TMP/wget.err | tail -1)"
fi

# Peer serving (settings.embedded.peer_serving): while the server's long poll says "serve", this
# host serves its verified image to hosts the server sends here (peer-image.cgi checks their
# tickets), straight from the disk, so it must stop before the partition is grown. Anything
# that goes wrong only ends the serving: this host's own deploy goes on.
serve_peers() {  # $1: the root disk, holding the verified image
  if [ -z "${PEER_PORT:-}" ] || [ -z "${PEER_KEY:-}" ] || [ -z "${IMAGE_SIZE:-}" ]; then
    post verified /dev/null
    return 0
  fi
  www=$TMP/peer/www
  mkdir -p "$www/cgi-bin"
  cp "${PEER_CGI:-/peer-image.cgi}" "$www/cgi-bin/image" && chmod 755 "$www/cgi-bin/image"
  export PEER_ENV=$TMP/peer/env
  printf 'PEER_KEY=%s\nPEER_DISK=%s\nIMAGE_SIZE=%s\n' "$PEER_KEY" "$1" "$IMAGE_SIZE" > "$PEER_ENV"
  httpd -f -p "${PEER_BIND:+$PEER_BIND:}$PEER_PORT" -h "$www" 2>>"$LOG" &
  httpd_pid=$!
  sleep 1
  if ! kill -0 "$httpd_pid" 2>/dev/null; then
    log "could not serve peers on port $PEER_PORT; going on without"
    post verified /dev/null
    return 0
  fi
  post "verified?serve=1" /dev/null
  log "serving the image to peers on port $PEER_PORT"
  since=$(date +%s)
  # the server ends the serving (peer_serve_max_s); this bound only outlives a server that
  # stopped answering "leave"
  limit=$(( ${PEER_MAX_S:-300} + 60 ))
  answer=serve
  while [ "$answer" = serve ] && [ $(( $(date +%s) - since )) -lt "$limit" ]; do
    answer=$(wget -q -O - --header "Authorization: Bearer $DEPLOY_TOKEN" "$PEER_URL" 2>/dev/null) \
      || answer=unreachable
  done
  kill "$httpd_pid" 2>/dev/null
  wait "$httpd_pid" 2>/dev/null
  log "stopped serving peers after $(( $(date +%s) - since )) s ($answer)"
}
serve_peers "$DEV/$disk"

blockdev --rereadpt "$DEV/$disk" 2>>"$LOG"
if [ -z "${ROOT_PART:-}" ]; then
  ROOT_PART=$(sfdisk -d "$DEV/$disk" | sed -n 's|^/dev/[^ ]*[^0-9]\([0-9][0-9]*\) :.*|\1|p' | tail -1)
fi
[ -n "$ROOT_PART" ] || fail "the image on /dev/$disk has no partition table"
if sfdisk -d "$DEV/$disk" | grep -q '^label: gpt'; then
  sfdisk --relocate gpt-bak-std "$DEV/$disk" >>"$LOG" 2>&1
fi
echo ", +" | sfdisk --no-reread --no-tell-kernel -N "$ROOT_PART" "$DEV/$disk" >>"$LOG" 2>&1 \
  || fail "growing partition $ROOT_PART of /dev/$disk failed"
blockdev --rereadpt "$DEV/$disk" 2>>"$LOG"
[ -x /lib/systemd/systemd-udevd ] && udevadm settle --timeout=30
root=$(partdev "$disk" "$ROOT_PART")
wait_dev "$root" || fail "$root did not appear after re-reading the partition table"
fstype=$(blkid -o value -s TYPE "$root")
case "$fstype" in
  ext2|ext3|ext4)
    e2fsck -fy "$root" >>"$LOG" 2>&1; rc=$?
    [ "$rc" -lt 4 ] || fail "e2fsck $root exited $rc"
    resize2fs "$root" >>"$LOG" 2>&1 || fail "resize2fs $root failed"
    ;;
  *) fail "root partition $root holds '$fstype'; only ext2/3/4 roots can be grown and seeded" ;;
esac
log "grew $root to $(cat /sys/class/block/${root#/dev/}/size) sectors"

mount -t "$fstype" "$root" /mnt || fail "mounting $root failed"
seed=/mnt/var/lib/cloud/seed/nocloud
mkdir -p "$seed"
for f in meta-data user-data network-config; do
  ask "$seed/$f" "$SEED_URL/$f" \
    || { umount /mnt; fail "fetching the cloud-init seed $f failed: $(asked)"; }
done
chmod 600 "$seed/user-data"
umount /mnt || fail "unmounting $root failed"
sync
log "cloud-init seed written to $root:/var/lib/cloud/seed/nocloud"

# NEXT_BOOT=kexec: start the installed OS's own kernel from here, sparing the host a second
# firmware POST; kexec-load.sh finds and loads it (nothing loaded: power off as usual).
next=reboot
if [ "${NEXT_BOOT:-reboot}" = kexec ]; then
  if loaded=$(sh "${KEXEC_LOAD:-/kexec-load.sh}" "$DEV/$disk" 2>$TMP/kexec.err); then
    log "$loaded"
    next=kexec
  else
    log "cannot kexec the installed OS ($(head -1 $TMP/kexec.err)); powering off for a reboot"
  fi
fi
post "finished?next=$next" "$LOG"
sync
if [ "$next" = kexec ]; then
  echo "deploy: done, starting the installed OS by kexec"
  ${KEXEC:-kexec} -e
  echo "deploy: kexec -e failed; powering off (the orchestrator retries with a reboot)"
fi
echo "deploy: done, powering off"
poweroff -f
