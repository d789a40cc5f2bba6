#!/usr/bin/env bash
# README's first command: installs what is needed, builds warren and its guest images, and
# starts warren on loopback with its embedded defaults (SSH 127.0.0.1:2222, HTTP
# 127.0.0.1:8080, data and images in /var/lib/warren), with the invoking user's SSH key as
# the first admin. Run it as root or with sudo.
# Where systemd is PID 1 it builds the Debian package (packaging/build-deb.sh), installs it
# with apt and starts warren.service, the admin and listeners in a drop-in
# (/etc/systemd/system/warren.service.d/quickstart.conf); elsewhere (containers, CI) it
# builds into build/ and starts warren in the background.
#   packaging/quickstart.sh         build and (re)start warren
#   packaging/quickstart.sh stop    stop it
# WARREN_SSH_LISTEN and WARREN_HTTP_LISTEN (ADDR:PORT) move the listeners, e.g. when 2222 or
# 8080 is taken; WARREN_DATA_DIR moves the state.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

if [[ $EUID -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "$0: run this as root" >&2; exit 1; }
  exec sudo -E bash "$0" "$@"
fi

data=${WARREN_DATA_DIR:-/var/lib/warren}
pidfile=$data/warren.pid
log=$data/warren.log
ssh_listen=${WARREN_SSH_LISTEN:-127.0.0.1:2222}
http_listen=${WARREN_HTTP_LISTEN:-127.0.0.1:8080}
ssh_port=${ssh_listen##*:}

stop_running() {
  if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    kill -TERM "$(cat "$pidfile")"
    for _ in $(seq 50); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.1; done
    echo "quickstart: stopped warren (pid $(cat "$pidfile"))"
  fi
  rm -f "$pidfile"
}

# systemd as PID 1 (sd_booted's test): warren runs as the packaged unit.
under_systemd=""
if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; then under_systemd=1; fi
dropin=/etc/systemd/system/warren.service.d/quickstart.conf

if [[ ${1:-} == stop ]]; then
  stop_running
  if [[ -n $under_systemd ]] && systemctl cat warren.service >/dev/null 2>&1; then
    systemctl stop warren.service && echo "quickstart: stopped warren.service"
  fi
  exit 0
fi

bash packaging/install-deps.sh
if [[ -n $under_systemd ]]; then
  deb=$(bash packaging/build-deb.sh build-deb | tail -1)
  apt-get install -y -qq "$(realpath "$deb")"
else
  bash packaging/build.sh
fi

# The first admin is whoever ran this (through sudo: the user behind sudo).
person=${SUDO_USER:-$(id -un)}
home=$(getent passwd "$person" | cut -d: -f6)
pub=""
for k in id_ed25519 id_ecdsa id_rsa; do
  if [[ -f $home/.ssh/$k.pub ]]; then pub=$home/.ssh/$k.pub && break; fi
done
if [[ -z $pub ]]; then
  echo "quickstart: no SSH key for $person; making $home/.ssh/id_ed25519"
  # runuser (util-linux) is on every Debian system; sudo may not be.
  runuser -u "$person" -- mkdir -p -m 0700 "$home/.ssh"
  runuser -u "$person" -- ssh-keygen -q -t ed25519 -N '' -C "$person@$(hostname)" \
    -f "$home/.ssh/id_ed25519"
  pub=$home/.ssh/id_ed25519.pub
fi

install -d -m 0711 "$data"
# The default guest image (and the tiny one, for quick tries). Idempotent: an image of
# today's version is kept; VMs keep the version they were made with.
bash packaging/images/build-debian.sh "$data/images"
bash packaging/images/build-tiny.sh "$data/images"

stop_running
if [[ -n $under_systemd ]]; then
  # The admin and listeners as command-line flags, which win over /etc/warren/warren.conf.
  mkdir -p "$(dirname "$dropin")"
  cat >"$dropin" <<UNIT
# Written by packaging/quickstart.sh: the first admin and the listeners it was run with.
[Service]
ExecStart=
ExecStart=/usr/bin/warren serve --config /etc/warren/warren.conf --data-dir "$data" --admin-key "$pub" --admin-name "$person" --ssh "$ssh_listen" --http "$http_listen"
ReadWritePaths="$data"
UNIT
  systemctl daemon-reload
  systemctl enable -q warren.service
  since=$(date '+%Y-%m-%d %H:%M:%S')
  # Type=notify: restart returns once warren said READY=1 (both listeners up, reconcile run).
  if ! systemctl restart warren.service; then
    echo "quickstart: warren.service did not start; its journal:" >&2
    journalctl -u warren.service --since "$since" -n 20 --no-pager >&2
    exit 1
  fi
  no_vms=$(journalctl -u warren.service --since "$since" --no-pager | grep "VMs unavailable" | head -1 || true)
  if [[ -n $no_vms ]]; then
    echo "quickstart: warren runs, but without VMs: $no_vms" >&2
  fi
  started="as warren.service (journalctl -u warren; stop: packaging/quickstart.sh stop)"
else
  # The log names users and key fingerprints: owner and group only. warren itself appends to it
  # (--log-file, which also narrows an older, looser file); the redirect catches what it says
  # before it opens the file.
  [[ -e $log ]] || install -m 0640 /dev/null "$log"
  # Ready once this start has logged both listeners (a port that merely answers could be
  # someone else's); a port in use makes warren exit, which is reported.
  log_start=$(($(stat -c %s "$log" 2>/dev/null || echo 0) + 1))
  setsid "$repo/build/warren" serve --data-dir "$data" --admin-key "$pub" --admin-name "$person" \
    --ssh "$ssh_listen" --http "$http_listen" --log-file "$log" >>"$log" 2>&1 </dev/null &
  echo $! >"$pidfile"

  ready=""
  for _ in $(seq 3000); do  # VMs (libvirtd, the KVM probe) come up first: minutes at worst
    if [[ $(tail -c +"$log_start" "$log" | grep -c -e "ssh listening on" -e "http listening on") -ge 2 ]]; then
      ready=1 && break
    fi
    kill -0 "$(cat "$pidfile")" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z $ready ]]; then
    echo "quickstart: warren did not start listening; the end of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  # warren serves the lobby without VMs when libvirt cannot start: say so rather than hide it.
  no_vms=$(tail -c +"$log_start" "$log" | grep "VMs unavailable" | head -1 || true)
  if [[ -n $no_vms ]]; then
    echo "quickstart: warren runs, but without VMs: $no_vms" >&2
  fi
  started="(pid $(cat "$pidfile"); log $log; stop: packaging/quickstart.sh stop)"
fi

cat <<MSG

warren is running $started.
Admin: $person, key $pub

  ssh -p $ssh_port localhost help        # every command
  ssh -p $ssh_port localhost whoami      # who you are
  ssh -p $ssh_port localhost             # the REPL (warren ▶)
  ssh -p $ssh_port localhost new         # a Debian VM (add --image tiny for a small one)
  ssh -p $ssh_port localhost ls          # your VMs

The first connection asks you to trust the host key; its fingerprint:
  $(ssh-keygen -lf "$data/ssh_host_ed25519_key.pub" 2>/dev/null || echo "(not yet written)")
MSG
