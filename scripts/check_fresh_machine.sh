#!/usr/bin/env bash
# Runs the README's first command (scripts/run.sh) on a fresh, minimal Debian 12 system: a
# throwaway root made with mmdebstrap (variant minbase: nothing beyond the essential packages),
# the checkout copied in, the command run inside it with chroot. No CUDA toolkit is there, so
# the CPU-only build must configure, build and run. Prints the elapsed time, the last lines of
# the pipeline's output and PASS or FAIL; exits with the command's status. This is how a missing
# install step (a package only "recommended" by another) shows before a user meets it.
#
#   sudo bash scripts/check_fresh_machine.sh              # HEAD of this checkout, cloned
#   sudo bash scripts/check_fresh_machine.sh --worktree   # the working tree as it is (uncommitted too)
#   sudo bash scripts/check_fresh_machine.sh -- bash scripts/test.sh   # another command
#
# On 2 cores: making the root takes under a minute, the first command then about 16 minutes
# (packages, assets, the launcher's build), scripts/test.sh about 35 (every test built and run).
# Needs root (mmdebstrap, chroot, mounts), network access to Debian's and npm's registries, and
# about 6 GiB in $TMPDIR (default /tmp). KEEP=1 keeps the root afterwards (its path is printed).
# Where this machine reaches the registries through its own CA certificates or npm
# configuration, those are copied into the root, as a new machine on the same network has them.
set -euo pipefail

root_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=clone
command=(bash scripts/run.sh)
while (($#)); do
  case "$1" in
    --worktree) mode=worktree; shift ;;
    --) shift; command=("$@"); break ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check_fresh_machine: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
((${#command[@]})) || { echo "check_fresh_machine: give a command after --" >&2; exit 2; }
((EUID == 0)) || { echo "check_fresh_machine: needs root (mmdebstrap, chroot, mounts): run it with sudo" >&2; exit 2; }
git -C "$root_dir" rev-parse --git-dir >/dev/null 2>&1 || { echo "check_fresh_machine: $root_dir is not a git checkout" >&2; exit 2; }

log() { echo "check_fresh_machine: $*"; }

if ! command -v mmdebstrap >/dev/null; then
  log "installing mmdebstrap"
  DEBIAN_FRONTEND=noninteractive apt-get -q update >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends mmdebstrap >/dev/null
fi

chroot_root=$(mktemp -d "${TMPDIR:-/tmp}/redwood-fresh.XXXXXX")
cleanup() {
  for m in dev/shm dev/pts dev proc; do umount -l "$chroot_root/$m" 2>/dev/null || true; done
  if [[ ${KEEP:-0} == 1 ]]; then
    log "root kept at $chroot_root"
  else
    rm -rf --one-file-system "$chroot_root"
  fi
}
trap cleanup EXIT

start=$SECONDS
log "making a minimal Debian 12 root in $chroot_root"
mmdebstrap --quiet --variant=minbase bookworm "$chroot_root" >/dev/null
cp /etc/resolv.conf "$chroot_root/etc/resolv.conf"
mount -t proc proc "$chroot_root/proc"
mount --bind /dev "$chroot_root/dev"
mount --bind /dev/pts "$chroot_root/dev/pts"
mount -t tmpfs tmpfs "$chroot_root/dev/shm"
# This network's trust and npm settings, where it has its own (a no-op on most machines).
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$chroot_root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$chroot_root/usr/local/share/ca-certificates/"
  chroot "$chroot_root" apt-get -q update >/dev/null
  chroot "$chroot_root" env DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends ca-certificates >/dev/null
  chroot "$chroot_root" update-ca-certificates >/dev/null
fi
for f in /etc/npmrc /usr/etc/npmrc "$HOME/.npmrc"; do
  if [[ -f $f ]]; then
    dest=$chroot_root${f/#$HOME//root}
    mkdir -p "${dest%/*}"
    cp "$f" "$dest"
  fi
done

project=$chroot_root/src/redwood
mkdir -p "$project"
if [[ $mode == clone ]]; then
  log "cloning HEAD ($(git -C "$root_dir" rev-parse --short HEAD)) into the root"
  git clone -q "$root_dir" "$project"
else
  log "copying the working tree (tracked and untracked, not ignored) into the root"
  (cd "$root_dir" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$project" 2>/dev/null || true)
fi
log "made in $((SECONDS - start)) s; running '${command[*]}' inside"

output=$chroot_root/tmp/check-fresh-machine.log
run_start=$SECONDS
set +e
chroot "$chroot_root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 CI=true \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
  /bin/bash -c 'cd /src/redwood && "$@"' check-fresh-machine "${command[@]}" </dev/null >"$output" 2>&1
status=$?
set -e
run_s=$((SECONDS - run_start))

echo "---- the last lines of its output ----"
tail -n 30 "$output"
echo "--------------------------------------"
log "'${command[*]}' exited $status after $((run_s / 60)) min $((run_s % 60)) s (root made in $((run_start - start)) s)"
if ((status == 0)); then log "PASS"; else log "FAIL (the whole output: KEEP=1 keeps it at <root>/tmp/check-fresh-machine.log)"; fi
exit "$status"
