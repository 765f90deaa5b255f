#!/bin/sh
# Load the default boot entry of the OS just written to a disk with kexec, so that the deploy can
# start it without a second firmware POST (minutes on a GPU server).
# Usage: kexec-load.sh /dev/<disk>    (image written, partitions grown, nothing mounted)
# Per partition, in order: Boot Loader Specification entries, GRUB's grub.cfg, SYSLINUX/EXTLINUX;
# then, last, /boot/vmlinuz + /boot/initrd.img (or /vmlinuz + /initrd.img) on a root filesystem.
# Success: one line on stdout, exit 0. Otherwise one line on stderr, exit 1, nothing loaded.
# Partitions are mounted read-only one at a time and always unmounted: the disk is never written.
# Everything read from the image is data: never evaluated, passed to kexec as single arguments.
# Overridable for tests: DEVDIR, SYSFS, TMPDIR, KEXEC (the kexec binary), and KEXEC_ROOTS:
# space-separated directories standing for the disk's mounted partitions, in order (nothing is
# mounted then; blkid still gives the fallback's UUID).
set -u
set -f   # names and values from the image never glob
IFS='
'
DEVDIR=${DEVDIR:-/dev}
SYSFS=${SYSFS:-/sys}
KEXEC=${KEXEC:-kexec}
MAXLEN=4096   # characters; a longer config line or command line is no boot loader's: refused
BLS_DIRS='loader
boot/loader'
GRUB_CFGS='boot/grub/grub.cfg
grub/grub.cfg
boot/grub2/grub.cfg'
SYSLINUX_CFGS='syslinux.cfg
syslinux/syslinux.cfg
extlinux.conf
boot/extlinux/extlinux.conf
extlinux/extlinux.conf'
LOOKED="BLS entries (loader/entries, boot/loader/entries), GRUB (boot/grub/grub.cfg, grub/grub.cfg, boot/grub2/grub.cfg), SYSLINUX/EXTLINUX (syslinux.cfg, syslinux/syslinux.cfg, extlinux.conf, boot/extlinux/extlinux.conf, extlinux/extlinux.conf), /boot/vmlinuz or /vmlinuz with its initrd.img"

disk=${1:-}
disk=${disk##*/}
[ -n "$disk" ] || { echo "kexec-load: usage: kexec-load.sh /dev/<disk>" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kexec-load.XXXXXX") || { echo "kexec-load: no temporary directory" >&2; exit 1; }
mnt=$tmp/mnt
mkdir "$mnt"
mounted=''
notes=''
note() { notes="$notes; $*"; }
# shellcheck disable=SC2086 # $1 is a pattern under our temporary directory
rmglob() { set +f; rm -f $1; set -f; }

close_part() {
  [ -n "$mounted" ] || return 0
  umount "$mnt" || { echo "kexec-load: cannot unmount $mounted from $mnt" >&2; exit 1; }
  mounted=''
}
# Never rm -r: while a partition is mounted that would reach into it (read-only, but still).
cleanup() {
  close_part
  rmglob "$tmp/c.*"; rmglob "$tmp/f.*"
  rm -f "$tmp/kernel" "$tmp/initrd" "$tmp/err"
  rmdir "$mnt" "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

partname() { case "$disk" in *[0-9]) echo "${disk}p$1" ;; *) echo "$disk$1" ;; esac; }
# The disk's partitions as "number name" lines, by number.
if [ -n "${KEXEC_ROOTS:-}" ]; then
  roots=$(printf '%s\n' "$KEXEC_ROOTS" | tr -s ' ' '\n' | sed '/^$/d')
  parts=$(n=0; for r in $roots; do n=$((n + 1)); echo "$n $(partname "$n")"; done)
else
  parts=$(set +f; for f in "$SYSFS/block/$disk"/*/partition; do
    [ -r "$f" ] && d=${f%/partition} && echo "$(cat "$f") ${d##*/}"
  done | sort -n)
fi
[ -n "$parts" ] || { echo "kexec-load: /dev/$disk has no partitions (looked in $SYSFS/block/$disk)" >&2; exit 1; }
name_of() { for l in $parts; do [ "${l%% *}" = "$1" ] && echo "${l#* }"; done; }

# Make partition $1 readable at $root; 1 (with a note) if it is not a filesystem we can mount.
open_part() {
  name=$(name_of "$1")
  if [ -n "${KEXEC_ROOTS:-}" ]; then
    root=$(printf '%s\n' "$roots" | sed -n "${1}p")
    fstype=dir
    return 0
  fi
  fstype=$(blkid -p -o value -s TYPE "$DEVDIR/$name" 2>/dev/null)
  case "$fstype" in
    ext2|ext3|ext4) opts=ro,noload ;;   # noload: no journal replay, which would write
    xfs) opts=ro,norecovery ;;          # the same for XFS's log
    btrfs) opts=ro,nologreplay ;;
    vfat) opts=ro ;;
    *) note "$name: ${fstype:-no filesystem}, not mounted"; return 1 ;;
  esac
  modprobe -q "$fstype" 2>/dev/null
  if ! mount -t "$fstype" -o "$opts" "$DEVDIR/$name" "$mnt" 2>/dev/null; then
    note "$name: $fstype did not mount"
    return 1
  fi
  mounted="$DEVDIR/$name"
  root=$mnt
}

# Resolve path $2 inside the tree at $1 as if that tree were /: symlinks are followed, absolute
# ones from the tree's top, and nothing leads out of it. Prints the path inside the tree.
# 1: missing or not a regular file; 2: the path leaves the partition (refused).
inroot() {
  ir_rest=$2 ir_out='' ir_hops=0
  while :; do
    while [ "${ir_rest#/}" != "$ir_rest" ]; do ir_rest=${ir_rest#/}; done
    [ -n "$ir_rest" ] || break
    case "$ir_rest" in
      */*) ir_c=${ir_rest%%/*}; ir_rest=${ir_rest#*/} ;;
      *) ir_c=$ir_rest; ir_rest='' ;;
    esac
    case "$ir_c" in
      .) continue ;;
      ..) [ -n "$ir_out" ] || return 2; ir_out=${ir_out%/*}; continue ;;
    esac
    if [ -L "$1$ir_out/$ir_c" ]; then
      ir_hops=$((ir_hops + 1))
      [ "$ir_hops" -le 40 ] || return 1
      ir_t=$(readlink "$1$ir_out/$ir_c") || return 1
      case "$ir_t" in /*) ir_out='' ;; esac
      ir_rest="$ir_t/$ir_rest"
    else
      ir_out="$ir_out/$ir_c"
    fi
  done
  [ -f "$1$ir_out" ] || return 1
  echo "$ir_out"
}

# awk helpers shared by the parsers. A line over MAXLEN characters is no boot loader's: it is
# counted (the config is refused) and never scanned by a pattern. val(): the line after its
# keyword.
# subvars(): GRUB variables ($name, ${name}) are the loader's run-time state: a word made of one
# variable that grubenv defines is replaced by its value, any other word holding one is dropped
# ($vt_handoff, ${extra_cmdline}); the rest of the line stays as written.
# shellcheck disable=SC2016 # awk programs
AWK_LIB='
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function val(   v) { v = substr($0, index($0, $1) + length($1)); return trim(v) }
function unq(s) { if (s ~ /^".*"$/ || s ~ /^\047.*\047$/) s = substr(s, 2, length(s) - 2); return s }
function grubpath(p) { sub(/^\([^)]*\)/, "", p); return p }
function subvars(s,   out, pre, post, ref, w0, w1, name) {
  out = ""
  while (match(s, /\$(\{[A-Za-z0-9_]+\}|[A-Za-z_][A-Za-z0-9_]*|[0-9?#@*])/)) {
    pre = substr(s, 1, RSTART - 1); ref = substr(s, RSTART, RLENGTH); post = substr(s, RSTART + RLENGTH)
    match(pre, /[^ \t]*$/); w0 = substr(pre, RSTART); pre = substr(pre, 1, RSTART - 1)
    match(post, /^[^ \t]*/); w1 = substr(post, 1, RLENGTH); post = substr(post, RLENGTH + 1)
    name = ref; gsub(/[${}]/, "", name)
    if (w0 == "" && w1 == "" && env[name] != "") { out = out pre env[name]; s = post; continue }
    dropped = dropped " " w0 ref w1
    sub(/[ \t]+$/, "", pre); out = out pre
    if (out == "") sub(/^[ \t]+/, "", post)
    s = post
  }
  return trim(out s)
}
# the paths of an initrd line, one a line; words with a variable ($tuned_initrd) are dropped
function paths(s,   n, w, j, r) {
  n = split(s, w, /[ \t]+/)
  for (j = 1; j <= n; j++) {
    if (w[j] == "") continue
    if (w[j] ~ /\$/) dropped = dropped " " w[j]; else r = r grubpath(w[j]) "\n"
  }
  return r
}
function readenv(f,   l, k) {
  if (f == "") return
  while ((getline l < f) > 0) {
    sub(/\r$/, "", l)
    if (length(l) > 4096 || l ~ /^#/ || !(k = index(l, "="))) continue
    env[substr(l, 1, k - 1)] = substr(l, k + 1)
  }
  close(f)
}
function emit(kind, what, kern, initrds, args,   n, i, p) {
  if (kern == "") return 0
  if (length(args) > MAXLEN) { print "the command line of " what " is " length(args) " characters, over " MAXLEN; return 0 }
  args = subvars(args)
  printf "%s\n", kern > (OUT ".kernel")
  n = split(initrds, p, "\n")
  for (i = 1; i <= n; i++) if (p[i] != "") printf "%s\n", p[i] > (OUT ".initrd")
  printf "%s", args > (OUT ".args")
  printf "%s %s", kind, what > (OUT ".src")
  if (dropped != "") printf "GRUB variables dropped:%s", dropped > (OUT ".note")
  return 1
}
BEGIN { MAXLEN += 0; readenv(ENVIRON["GRUBENV"]) }
{ sub(/\r$/, "") }
length($0) > MAXLEN { long++; next }
'
# Each parser writes one entry as files $OUT.kernel, .initrd (one path a line), .args, .src
# (what it came from), .note; prints a reason on stdout when a config holds no usable entry.

# BLS: one file per entry. Without a usable "default" in loader.conf the first entry of the
# spec's order is taken: file names in decreasing version order (newest kernel first).
# sort-key is not read (one OS writes one sort-key for all its entries).
# shellcheck disable=SC2016
BLS_AWK='
$1 == "linux" && k == "" { k = val() }
$1 == "initrd" { i = i paths(val()) }
$1 == "options" { o = (o == "" ? "" : o " ") val() }
END {
  if (long) { print NAME ": " long " line(s) over " MAXLEN " characters, not a boot config"; exit 1 }
  if (k == "") { print NAME ": no linux line (only kernels can be loaded by kexec)"; exit 1 }
  exit !emit("BLS", NAME, k, i, o)
}'

# GRUB: the menuentry "set default=" names (the last one outside entries): a number, "N>M" into
# a submenu, or an entry title or id; "${saved_entry}" and the like are looked up in grubenv.
# Anything else, or no default, is the first menuentry. In an entry, the first linux line and
# the first initrd line (several paths on it are several initrds).
# shellcheck disable=SC2016
GRUB_AWK='
function add(kind, title, id) {
  if (depth == 0) { key = top++ } else if (stack[depth] == "s") { key = subkey ">" sub_n++ } else return
  allk[++na] = key
  if (kind == "s") { subkey = key; sub_n = 0; issub[key] = 1; title_of[key] = title; id_of[key] = id; return }
  order[++n] = key; title_of[key] = title; id_of[key] = id; cur = key
}
function head(kw,   s, t, id, q) {
  s = $0; sub(/^[ \t]*[a-z]+[ \t]+/, "", s)
  q = substr(s, 1, 1)
  if (q == "\"" || q == "\047") { s = substr(s, 2); t = substr(s, 1, index(s, q) - 1); s = substr(s, index(s, q) + 1) }
  else { t = s; sub(/[ \t].*/, "", t); s = substr(s, length(t) + 1) }
  id = ""
  if (match(s, /(--id[ =]|\$menuentry_id_option[ \t]+)[^ \t]+/)) {
    id = substr(s, RSTART, RLENGTH); sub(/^(--id[ =]|\$menuentry_id_option[ \t]+)/, "", id); id = unq(id)
  }
  add(kw, t, id)
}
function find(v, inside,   j, k) {
  if (v ~ /^[0-9]+$/) { k = (inside == "" ? v : inside ">" v); return (k in title_of) ? k : "" }
  for (j = 1; j <= na; j++) {
    k = allk[j]
    if (inside == "" ? k ~ />/ : index(k, inside ">") != 1) continue
    if (title_of[k] == v || id_of[k] == v) return k
  }
  return ""
}
$1 == "}" { if (depth > 0) { if (stack[depth] == "m") cur = ""; depth-- }; next }
$1 == "menuentry" || $1 == "submenu" {
  head($1 == "menuentry" ? "m" : "s")
  if ($NF ~ /\{$/) stack[++depth] = ($1 == "menuentry" ? "m" : "s")
  next
}
/\{[ \t]*$/ { stack[++depth] = "o"; next }
$1 == "set" && depth == 0 && $2 ~ /^default=/ { def = val(); sub(/^default=/, "", def); def = unq(def); next }
cur != "" && ($1 == "linux" || $1 == "linuxefi" || $1 == "linux16") && !(cur in kern) {
  v = val(); p = v; sub(/[ \t].*/, "", p)
  kern[cur] = grubpath(p); args[cur] = trim(substr(v, length(p) + 1))
}
cur != "" && ($1 == "initrd" || $1 == "initrdefi" || $1 == "initrd16") && !(cur in ird) {
  ird[cur] = paths(val())
}
END {
  if (long) { print NAME ": " long " line(s) over " MAXLEN " characters, not a boot config"; exit 1 }
  if (n == 0) { print NAME ": no menuentry"; exit 1 }
  d = def
  if (d ~ /^\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$/) { gsub(/[${}]/, "", d); d = env[d] }
  k = ""
  if (d != "") {
    if (index(d, ">")) { k = find(substr(d, 1, index(d, ">") - 1), ""); if (k != "") k = find(substr(d, index(d, ">") + 1), k) }
    else { k = find(d, ""); if (k in issub) k = find("0", k) }
  }
  if (k == "" || !(k in kern)) k = order[1]
  t = title_of[k]
  if (!(k in kern)) { print NAME ": menuentry \047" t "\047 has no linux line"; exit 1 }
  exit !emit("GRUB", NAME " entry \047" t "\047", kern[k], ird[k], args[k])
}'

# SYSLINUX/EXTLINUX: keywords in any case; the label MENU DEFAULT marks, else DEFAULT names,
# else the first; INITRD (comma-separated) or initrd= in APPEND. Relative paths start at the
# config file's directory (DIR), as SYSLINUX reads them.
# shellcheck disable=SC2016
SYSLINUX_AWK='
function rel(p) { return p ~ /^\// ? p : DIR "/" p }
{ kw = tolower($1) }
kw == "default" { def = $2 }
kw == "label" { lab[++n] = val(); c = n }
kw == "menu" && tolower($2) == "default" && c { mdef = c }
(kw == "linux" || kw == "kernel") && c { kern[c] = val() }
kw == "initrd" && c { ird[c] = val() }
kw == "append" { if (c) app[c] = val(); else gapp = val() }
END {
  if (long) { print NAME ": " long " line(s) over " MAXLEN " characters, not a boot config"; exit 1 }
  if (n == 0) { print NAME ": no LABEL"; exit 1 }
  c = mdef
  for (j = 1; j <= n && !c; j++) if (lab[j] == def) c = j
  if (!c) c = 1
  a = (c in app) ? app[c] : gapp
  if (a == "-") a = ""
  r = ird[c]
  if (r == "" && match(a, /(^|[ \t])initrd=[^ \t]+/)) { r = substr(a, RSTART, RLENGTH); sub(/^[ \t]*initrd=/, "", r) }
  m = split(r, w, ","); r = ""
  for (j = 1; j <= m; j++) if (w[j] != "") r = r rel(w[j]) "\n"
  if (!(c in kern)) { print NAME ": label \047" lab[c] "\047 has no LINUX/KERNEL line"; exit 1 }
  exit !emit("SYSLINUX", NAME " label \047" lab[c] "\047", rel(kern[c]), r, a)
}'

# Run parser $1 over file $2 of the open partition as candidate $3; $4: config dir (SYSLINUX).
parse() {
  f=$(inroot "$root" "$2") || return 1
  genv=''
  for ge in grub/grubenv boot/grub/grubenv grub2/grubenv boot/grub2/grubenv; do
    genv=$(inroot "$root" "$ge") && genv=$root$genv && break
    genv=''
  done
  r=$(GRUBENV=$genv awk -v MAXLEN="$MAXLEN" -v OUT="$tmp/c.$3" -v NAME="$2" -v DIR="${4:-}" \
    "$AWK_LIB$1" "$root$f" 2>&1) || { [ -n "$r" ] && note "$name: $(printf '%s' "$r" | tr '\n' ' ')"; rmglob "$tmp/c.$3.*"; return 1; }
  [ -n "$r" ] && note "$name: $(printf '%s' "$r" | tr '\n' ' ')"
  return 0
}

find_bls() {
  for b in $BLS_DIRS; do
    [ -d "$root/$b/entries" ] || continue
    list=$(set +f; for e in "$root/$b/entries"/*.conf; do [ -f "$e" ] && echo "${e##*/}"; done | sort -V -r)
    [ -n "$list" ] || continue
    def='' pick=''
    lc=$(inroot "$root" "$b/loader.conf") &&
      def=$(awk '{ sub(/\r$/, "") } length($0) <= 4096 && $1 == "default" { v = $2 } END { print v }' "$root$lc")
    if [ -n "$def" ]; then
      # a glob on the entry id, with or without .conf ("@saved" and the like match nothing)
      # shellcheck disable=SC2254
      for e in $list; do case "$e" in $def|$def.conf) pick=$e; break ;; esac; done
    fi
    [ -n "$pick" ] || pick=$(printf '%s\n' "$list" | head -n 1)
    parse "$BLS_AWK" "$b/entries/$pick" "$1" && return 0
  done
  return 1
}
find_grub() {
  for g in $GRUB_CFGS; do parse "$GRUB_AWK" "$g" "$1" && return 0; done
  return 1
}
find_syslinux() {
  for s in $SYSLINUX_CFGS; do
    dir=${s%/*}; [ "$dir" = "$s" ] && dir=''
    parse "$SYSLINUX_AWK" "$s" "$1" "${dir:+/$dir}" && return 0
  done
  return 1
}
# The Debian/Ubuntu kernel symlinks, on a partition that holds a root filesystem (an etc/).
find_fallback() {
  [ -d "$root/etc" ] || return 1
  for k in /boot/vmlinuz /vmlinuz; do
    if ! inroot "$root" "$k" >/dev/null || ! inroot "$root" "${k%vmlinuz}initrd.img" >/dev/null; then
      continue
    fi
    uuid=$(blkid -p -o value -s UUID "$DEVDIR/$name" 2>/dev/null)
    [ -n "$uuid" ] || { note "$name: has $k but no filesystem UUID for root="; return 1; }
    echo "$k" > "$tmp/c.$1.kernel"
    echo "${k%vmlinuz}initrd.img" > "$tmp/c.$1.initrd"
    printf 'root=UUID=%s ro' "$uuid" > "$tmp/c.$1.args"
    printf 'fallback %s' "$k" > "$tmp/c.$1.src"
    return 0
  done
  return 1
}

# Pass 1: every entry the partitions offer, in the order they are to be tried (files c.N.*;
# c.N.part: the partition holding its config); the fallback (c.fb.*) last.
nc=0 fb='' opened=''
for p in $parts; do
  n=${p%% *}
  open_part "$n" || continue
  opened="$opened
$n"
  found=''
  for finder in find_bls find_grub find_syslinux; do
    if $finder "$((nc + 1))"; then nc=$((nc + 1)); echo "$n" > "$tmp/c.$nc.part"; found=1; fi
  done
  if [ -z "$fb" ] && find_fallback fb; then echo "$n" > "$tmp/c.fb.part"; fb=1; found=1; fi
  [ -n "$found" ] || note "$name ($fstype): nothing bootable"
  close_part
done
cands=$(seq 1 "$nc"; [ -n "$fb" ] && echo fb)

# Copy path $1 of the open partition to $2 unless an earlier partition had it.
fetch() {
  [ -e "$2" ] && return 0
  got=$(inroot "$root" "$1"); rc=$?
  if [ "$rc" = 2 ]; then
    case " $refused " in *" $1 "*) ;; *) refused="$refused $1" ;; esac
    return 1
  fi
  [ "$rc" = 0 ] || return 1
  cp "$root$got" "$2" || { rm -f "$2"; return 1; }
  echo "$got" > "$2.path"
  [ "$name" = "$home" ] || echo "$1 from /dev/$name" >> "$tmp/f.elsewhere"
}

# Pass 2: the first candidate whose kernel and initrds are all found, on the partition of its
# config first, then on the disk's others (a /boot partition apart from the root).
chosen=''
for c in $cands; do
  rmglob "$tmp/f.*"
  refused='' missing=''
  hp=$(cat "$tmp/c.$c.part")
  home=$(name_of "$hp")
  kernel=$(cat "$tmp/c.$c.kernel")
  initrds=$(cat "$tmp/c.$c.initrd" 2>/dev/null)
  for p in "$hp" $(printf '%s\n' "$opened" | grep -vx "$hp"); do
    open_part "$p" || continue
    fetch "$kernel" "$tmp/f.kernel"
    i=0
    for r in $initrds; do i=$((i + 1)); fetch "$r" "$tmp/f.initrd.$i"; done
    close_part
  done
  src="$(cat "$tmp/c.$c.src") on /dev/$home"
  [ -e "$tmp/f.kernel" ] || missing=" $kernel"
  i=0
  for r in $initrds; do i=$((i + 1)); [ -e "$tmp/f.initrd.$i" ] || missing="$missing $r"; done
  if [ -n "$refused" ]; then
    note "$src: refused$refused (outside the partition)"
  elif [ -n "$missing" ]; then
    note "$src: not on any partition:$missing"
  else
    chosen=$c
    break
  fi
done
if [ -z "$chosen" ]; then
  echo "kexec-load: nothing to load from /dev/$disk: looked on $(for l in $parts; do printf '%s ' "${l#* }"; done)for $LOOKED$notes" >&2
  exit 1
fi

# kexec takes one initrd: several are concatenated, each padded to 4 bytes, as GRUB lays them
# out in memory (the kernel unpacks the archives one after the other).
set --
if [ -e "$tmp/f.initrd.1" ]; then
  if [ -e "$tmp/f.initrd.2" ]; then
    i=1
    while [ -e "$tmp/f.initrd.$i" ]; do
      cat "$tmp/f.initrd.$i" >> "$tmp/initrd"
      pad=$(( (4 - $(wc -c < "$tmp/initrd") % 4) % 4 ))
      [ "$pad" = 0 ] || head -c "$pad" /dev/zero >> "$tmp/initrd"
      i=$((i + 1))
    done
    initrd_note=" + initrds $(printf '%s' "$initrds" | tr '\n' ' ') (concatenated)"
  else
    mv "$tmp/f.initrd.1" "$tmp/initrd"
    initrd_note=" + $initrds"
  fi
  set -- --initrd="$tmp/initrd"
else
  initrd_note=' (no initrd)'
fi
mv "$tmp/f.kernel" "$tmp/kernel"
got=$(cat "$tmp/f.kernel.path")
[ "$got" = "$kernel" ] || kernel="$kernel -> $got"   # a symlink: say which kernel it is
args=$(cat "$tmp/c.$chosen.args")
extra=''
[ -s "$tmp/f.elsewhere" ] && extra="; $(tr '\n' ';' < "$tmp/f.elsewhere" | sed 's/;$//; s/;/, /g')"
[ -s "$tmp/c.$chosen.note" ] && extra="$extra; $(cat "$tmp/c.$chosen.note")"

# kexec_file_load (-s) first: the only one Secure Boot's lockdown allows (the kernel checks the
# image's signature); kexec_load (-l) where the kernel lacks it or refuses the file.
if "$KEXEC" -s -l "$@" --command-line="$args" "$tmp/kernel" > "$tmp/err" 2>&1; then
  how='kexec -s'
else
  why_s=$(tail -n 1 "$tmp/err")
  if "$KEXEC" -l "$@" --command-line="$args" "$tmp/kernel" > "$tmp/err" 2>&1; then
    how="kexec -l, as kexec -s failed: $why_s"
  else
    echo "kexec-load: found $kernel$initrd_note ($src) but kexec refused it: kexec -s: $why_s; kexec -l: $(tail -n 1 "$tmp/err")" >&2
    exit 1
  fi
fi
echo "kexec: loaded $kernel$initrd_note ($src; $how$extra) $args"
