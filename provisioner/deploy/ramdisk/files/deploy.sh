#!/bin/sh
# Image deploy, run by the ramdisk's init with the host's one-time configuration:
# pick the root disk by its hint, stream the image onto it while hashing it, verify the sha256,
# grow the root partition and filesystem, write the cloud-init NoCloud seed, report, power off.
# Only the chosen disk is written: data disks are never touched.
set -u
. "$1"   # DEPLOY_TOKEN CALLBACK_URL IMAGE_URL IMAGE_SHA256 ROOT_PART SEED_URL HINT_ARGS IMAGE_WAIT_S IMAGE_RETRY_S IMAGE_ATTEMPTS
LOG=${DEPLOY_LOG:-/tmp/deploy.log}
DEV=${DEVDIR:-/dev}   # overridable, like pick-disk.sh's, so tests can run this on a fake disk
TMP=${TMPDIR:-/tmp}
SYS=${SYSFS:-/sys}
: > "$LOG"
log() { echo "deploy: $*" | tee -a "$LOG"; }
post() {
  wget -q -O /dev/null --header "Authorization: Bearer $DEPLOY_TOKEN" --post-file "$2" \
    "$CALLBACK_URL/$1" || echo "deploy: callback $1 failed"
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
    rm -f $TMP/sum.fifo; mkfifo $TMP/sum.fifo
    sha256sum < $TMP/sum.fifo > $TMP/sum &
    hasher=$!
    set -o pipefail
    if wget -q -S -O - "$IMAGE_URL" 2>$TMP/wget.err | tee $TMP/sum.fifo \
        | dd of="$1" bs=4M iflag=fullblock conv=notrunc,fsync 2>>"$LOG"; then
      set +o pipefail
      wait "$hasher"
      [ "$busy" -gt 0 ] && log "image stream admitted after $busy busy answer(s), $(( $(date +%s) - waited_since )) s"
      return 0
    fi
    set +o pipefail
    wait "$hasher"
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
tries=${IMAGE_ATTEMPTS:-2}
n=1
while :; do
  log "streaming $IMAGE_URL to /dev/$disk"
  stream_image "$DEV/$disk"
  case $? in
    0)
      got=$(cut -d' ' -f1 $TMP/sum)
      [ "$got" = "$IMAGE_SHA256" ] && break
      # a corrupt image must never boot: clear its partition table
      dd if=/dev/zero of="$DEV/$disk" bs=1M count=1 conv=fsync 2>/dev/null
      why="image sha256 mismatch: expected $IMAGE_SHA256, got $got" ;;
    2) fail "the deploy server's image streams stayed busy (503) for over ${IMAGE_WAIT_S:-7200}s; raise settings.embedded.max_image_streams or image_wait_s, or deploy fewer hosts at once (--max-parallel)" ;;
    *) why="download or write of the image failed" ;;
  esac
  [ "$n" -lt "$tries" ] || fail "$why"
  n=$((n + 1))
  log "$why; streaming the image again ($n/$tries)"
done
log "sha256 verified: $got"

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
  wget -q -O "$seed/$f" --header "Authorization: Bearer $DEPLOY_TOKEN" "$SEED_URL/$f" \
    || { umount /mnt; fail "fetching the cloud-init seed $f failed"; }
done
chmod 600 "$seed/user-data"
umount /mnt || fail "unmounting $root failed"
sync
log "cloud-init seed written to $root:/var/lib/cloud/seed/nocloud"
post finished "$LOG"
sync
echo "deploy: done, powering off"
poweroff -f
