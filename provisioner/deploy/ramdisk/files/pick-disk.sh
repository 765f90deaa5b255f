#!/bin/sh
# Pick the root disk by its hint; print its kernel name (e.g. vdb) and nothing else on stdout.
# Usage: pick-disk.sh [--serial S] [--wwn W] [--by-path P] [--model M] [--min-gb N] [--max-gb N]
#          [--match-serial G] [--match-model G] [--match-id-path G] [--pin FILE --placeholder P]
#          [--count N]
# Every given criterion must hold. Exit 3, listing every candidate on stderr, unless exactly one
# disk matches: writing an OS to a guessed disk could destroy a data disk.
# Models compare as udev stores them (blank runs -> one "_"), so "Dell BOSS-N1" = "Dell_BOSS-N1".
# --match-*: the autoinstall installer's own globs against the same udev properties it reads
# (ID_SERIAL, ID_MODEL, ID_PATH; needs udevadm): they must select exactly the hint's disk.
# --pin: replace the placeholder in FILE (/autoinstall.yaml) with /dev/<disk>.
# --count N: the hint must select exactly N disks (a mirrored root: N=2); with --pin the
# placeholder is a prefix: P0, P1, ... become the disks in kernel-name order.
# Shared by the deploy ramdisk and the autoinstall early-command guard; POSIX sh + sysfs only.
# SYSFS and DEVDIR are overridable so that tests can run the script against a fake tree.
SYSFS=${SYSFS:-/sys}
DEVDIR=${DEVDIR:-/dev}
serial='' wwn='' bypath='' model='' mingb='' maxgb=''
mserial='' mmodel='' midpath='' mset='' pin='' placeholder='' want=1
while [ $# -gt 0 ]; do
  case "$1" in
    --serial) serial=$2; shift 2 ;;
    --wwn) wwn=$2; shift 2 ;;
    --by-path) bypath=${2##*/by-path/}; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --min-gb) mingb=$2; shift 2 ;;
    --max-gb) maxgb=$2; shift 2 ;;
    --match-serial) mserial=$2; mset=1; shift 2 ;;
    --match-model) mmodel=$2; mset=1; shift 2 ;;
    --match-id-path) midpath=$2; mset=1; shift 2 ;;
    --pin) pin=$2; shift 2 ;;
    --placeholder) placeholder=$2; shift 2 ;;
    --count) want=$2; shift 2
      case "$want" in [1-9]) ;; *) echo "pick-disk: --count takes 1 to 9" >&2; exit 2 ;; esac ;;
    *) echo "pick-disk: unknown argument $1" >&2; exit 2 ;;
  esac
done

clean() { tr -d '\000' | tr -s ' \t\n' ' ' | sed 's/^ *//; s/ *$//'; }
first_of() { for f in "$@"; do if [ -r "$f" ]; then clean < "$f"; return 0; fi; done; return 1; }
ublank() { printf '%s' "$1" | tr -s ' \t' '  ' | sed 's/^ *//; s/ *$//; s/ /_/g'; }
norm_wwn() { tr 'A-Z' 'a-z' | sed 's/^wwn-//; s/^naa\.//; s/^eui\.//; s/^0x//'; }
udev_prop() { command -v udevadm >/dev/null 2>&1 && udevadm info -q property -n "$DEVDIR/$1" 2>/dev/null | sed -n "s/^$2=//p"; }

disk_serial() {
  first_of "$SYSFS/block/$1/serial" "$SYSFS/block/$1/device/serial" && return 0
  if [ -r "$SYSFS/block/$1/device/vpd_pg80" ]; then
    dd if="$SYSFS/block/$1/device/vpd_pg80" bs=1 skip=4 2>/dev/null | clean; return 0
  fi
  udev_prop "$1" ID_SERIAL_SHORT
}
disk_wwn() {
  w=$(first_of "$SYSFS/block/$1/wwid" "$SYSFS/block/$1/device/wwid") || w=$(udev_prop "$1" ID_WWN)
  printf '%s' "$w" | norm_wwn
}
disk_bypath() {
  for l in "$DEVDIR"/disk/by-path/*; do
    [ -L "$l" ] || continue
    if [ "$(basename "$(readlink "$l")")" = "$1" ]; then echo "${l##*/}"; return 0; fi
  done
  udev_prop "$1" ID_PATH
}

if [ -n "$mset" ] && ! command -v udevadm >/dev/null 2>&1; then
  echo "pick-disk: --match-* needs udevadm (the installer's udev properties)" >&2; exit 2
fi
if [ -n "$pin" ] && [ -z "$placeholder" ]; then
  echo "pick-disk: --pin needs --placeholder" >&2; exit 2
fi
want_wwn=$(printf '%s' "$wwn" | norm_wwn)
want_model=$(ublank "$model")
matches='' count=0 report='' mmatches='' mcount=0
for sys in "$SYSFS"/block/*; do
  d=${sys##*/}
  case "$d" in loop*|ram*|zram*|sr*|fd*|dm-*|md*|nbd*) continue ;; esac
  sectors=$(cat "$sys/size" 2>/dev/null || echo 0)
  [ "$sectors" -gt 0 ] || continue
  if [ -n "$mset" ]; then
    # The installer considers every non-empty disk, removable ones included.
    us=$(udev_prop "$d" ID_SERIAL); um=$(udev_prop "$d" ID_MODEL); up=$(udev_prop "$d" ID_PATH)
    mok=1
    # shellcheck disable=SC2254 # the patterns are globs on purpose, as the installer's are
    if [ -n "$mserial" ]; then case "$us" in $mserial) ;; *) mok=0 ;; esac; fi
    # shellcheck disable=SC2254
    if [ -n "$mmodel" ]; then case "$um" in $mmodel) ;; *) mok=0 ;; esac; fi
    # shellcheck disable=SC2254
    if [ -n "$midpath" ]; then case "$up" in $midpath) ;; *) mok=0 ;; esac; fi
    if [ "$mok" = 1 ]; then mmatches="$mmatches $d"; mcount=$((mcount + 1)); fi
  fi
  [ "$(cat "$sys/removable" 2>/dev/null)" = 1 ] && continue
  s=$(disk_serial "$d"); w=$(disk_wwn "$d"); p=$(disk_bypath "$d")
  # udev's ID_MODEL first: for ATA disks sysfs has the 16-character SCSI product string only.
  m=$(udev_prop "$d" ID_MODEL); [ -n "$m" ] || m=$(first_of "$sys/device/model" || true)
  gb=$(awk -v s="$sectors" 'BEGIN { printf "%.1f", s * 512 / 1e9 }')
  report="$report  $d serial=${s:-?} wwn=${w:-?} model=\"${m:-?}\" size_gb=$gb by_path=${p:-?}
"
  ok=1
  [ -n "$serial" ] && [ "$s" != "$serial" ] && ok=0
  [ -n "$want_wwn" ] && [ "$w" != "$want_wwn" ] && ok=0
  [ -n "$bypath" ] && [ "$p" != "$bypath" ] && ok=0
  [ -n "$model" ] && [ "$(ublank "$m")" != "$want_model" ] && ok=0
  [ -n "$mingb" ] && awk -v a="$gb" -v b="$mingb" 'BEGIN { exit !(a < b) }' && ok=0
  [ -n "$maxgb" ] && awk -v a="$gb" -v b="$maxgb" 'BEGIN { exit !(a > b) }' && ok=0
  if [ "$ok" = 1 ]; then matches="$matches $d"; count=$((count + 1)); fi
done

hint=''
[ -n "$serial" ] && hint="$hint serial=$serial"
[ -n "$wwn" ] && hint="$hint wwn=$wwn"
[ -n "$bypath" ] && hint="$hint by_path=$bypath"
[ -n "$model" ] && hint="$hint model=\"$model\""
[ -n "$mingb" ] && hint="$hint size_gb_min=$mingb"
[ -n "$maxgb" ] && hint="$hint size_gb_max=$maxgb"
[ -n "$hint" ] || hint=' (none: any disk)'
if [ "$count" -ne "$want" ]; then
  if [ "$count" -eq 0 ]; then what="no disk matches"; else what="$count disks match ($matches )"; fi
  [ "$want" -ne 1 ] && what="$what, $want wanted,"
  printf 'root disk hint: %s the hint%s; refusing to guess\ndisks seen:\n%s' \
    "$what" "$hint" "$report" >&2
  exit 3
fi
if [ -n "$mset" ] && { [ "$mcount" -ne 1 ] || [ "${mmatches# }" != "${matches# }" ]; }; then
  printf 'root disk: the hint selects %s but the installer match (serial=%s model=%s id_path=%s) selects %s disk(s) (%s ); refusing\ndisks seen:\n%s' \
    "${matches# }" "${mserial:--}" "${mmodel:--}" "${midpath:--}" "$mcount" "$mmatches" "$report" >&2
  exit 3
fi
if [ -n "$pin" ]; then
  # /autoinstall.yaml is re-read after the early-commands: the installer takes these very disks.
  if [ "$want" -eq 1 ]; then
    expr="s#$placeholder#/dev/${matches# }#g"
  else
    expr='' i=0
    for d in $matches; do expr="${expr}s#$placeholder$i#/dev/$d#g;"; i=$((i + 1)); done
  fi
  sed "$expr" "$pin" > "$pin.tmp" && mv "$pin.tmp" "$pin" && ! grep -q "$placeholder" "$pin" \
    || { echo "pick-disk: could not pin $pin" >&2; exit 4; }
fi
echo "${matches# }"
