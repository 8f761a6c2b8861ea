#!/usr/bin/env bash
# A multi-host kvferry cluster on one machine: one network namespace per node
# of a cluster file (each with the node's host address on a veth link), a hub
# namespace whose bridge joins them (it holds .254 of the same /24, so
# kvferry-ctl can run there), one kvferry-launch --node per namespace. Real
# TCP between separate network stacks. Needs root and `ip netns`.
#
#   deploy/netns-cluster.sh run FILE        up, wait for every node to exit, print
#                                           their logs, down (also on Ctrl-C)
#   deploy/netns-cluster.sh up FILE         create the namespaces, start the nodes
#   deploy/netns-cluster.sh status FILE     kvferry-ctl status, from the hub
#   deploy/netns-cluster.sh kill FILE NODE  kill -9 one node (its rank children die with it)
#   deploy/netns-cluster.sh cut FILE NODE   cut one node's link (its veth down: packets
#                                           vanish, no connection is reset)
#   deploy/netns-cluster.sh heal FILE NODE  bring a cut link back up
#   deploy/netns-cluster.sh wait FILE       until every node process has exited
#   deploy/netns-cluster.sh down FILE       stop the nodes, delete the namespaces
#
# Options (before the command): --prefix P (namespaces P-hub, P-n1...; default
# kvf; letters, digits, - and _, at most 8 characters), --state DIR (logs and
# pids; default: a fresh private directory from mktemp -d, see below), --bin
# DIR (where kvferry-launch and kvferry-ctl are; default build/apps).
# Arguments after -- go to every kvferry-launch.
# deploy/clusters/netns-3node.toml uses the addresses 10.77.0.1-3.
#
# It runs as root, so it never writes through a path someone else could have
# prepared: without --state, `up` and `run` make the state directory with
# mktemp -d (mode 0700, under $TMPDIR or /tmp) and `up` records where it is in
# /run/kvferry-netns/P (root's, 0700), where status, kill, wait and down find
# it. A --state DIR is created with mode 0700 if missing; an existing one must
# be a real directory (not a symlink) of this user that nobody else can write,
# and so must every directory above it (or be sticky, as /tmp is). Node names
# become file names there, so they must be plain names. A failed or
# interrupted `up` removes what it created (trap); `run` always goes down, and
# removes its temporary directory once it has printed the logs (an interrupted
# run keeps it and says where). `down` keeps the logs and says where they are.
set -euo pipefail
umask 077

prefix=kvf
state=""
bin="build/apps"
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --prefix) prefix=${2:?--prefix needs a value}; shift 2 ;;
    --state) state=${2:?--state needs a directory}; shift 2 ;;
    --bin) bin=${2:?--bin needs a directory}; shift 2 ;;
    *) echo "netns-cluster: unknown option $1; expected --prefix, --state or --bin" >&2; exit 2 ;;
  esac
done
if [[ $# -lt 2 ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
  exit 2
fi
cmd=$1
file=$2
shift 2
node_arg=""
if [[ $cmd == kill || $cmd == cut || $cmd == heal ]]; then
  node_arg=${1:?$cmd needs a node name}
  shift
fi
[[ ${1:-} == -- ]] && shift
extra=("$@")
launch="$bin/kvferry-launch"
ctl="$bin/kvferry-ctl"
if [[ ! $prefix =~ ^[A-Za-z0-9_-]{1,8}$ ]]; then
  echo "netns-cluster: --prefix '$prefix' is not 1 to 8 letters, digits, - or _" >&2
  exit 2
fi

pointer_dir=/run/kvferry-netns
pointer=$pointer_dir/$prefix
made_tmp=0        # 1: this invocation made $state with mktemp -d
armed=0           # 1: $state is this invocation's own (the traps may undo it)
state_given=0
[[ -n $state ]] && state_given=1

die() { echo "netns-cluster: $*" >&2; exit 2; }

need_root() {
  if [[ $(id -u) -ne 0 ]]; then echo "netns-cluster: needs root (ip netns)" >&2; exit 3; fi
  if ! ip netns list >/dev/null 2>&1; then echo "netns-cluster: ip netns does not work here" >&2; exit 3; fi
}

# A node name, or the kill argument, as a file name in $state.
plain_name() { [[ $1 =~ ^[A-Za-z0-9_][A-Za-z0-9._-]*$ ]]; }

# Every directory from / down to $1 (a resolved path, no symlinks) belongs to
# root or to this user, and nobody else can write to it unless it is sticky
# (then nobody else can rename or remove what this user made there).
safe_ancestors() {
  local d=$1 uid mode me
  me=$(id -u)
  while :; do
    read -r uid mode < <(stat -c '%u %a' -- "$d")
    if [[ $uid != 0 && $uid != "$me" ]]; then
      die "$d belongs to uid $uid; expected root or uid $me above a state directory"
    fi
    if (( (8#$mode & 8#022) != 0 && (8#$mode & 8#1000) == 0 )); then
      die "$d is writable by others (mode $mode) and not sticky; expected a directory only its owner can write"
    fi
    [[ $d == / ]] && return 0
    d=$(dirname -- "$d")
  done
}

# $1 is a real directory (not a symlink) of this user that nobody else can write.
private_dir() {
  local d=$1 uid mode
  [[ ! -L $d ]] || die "$d is a symlink; expected a real directory (refusing to follow it as root)"
  [[ -d $d ]] || die "$d is not a directory"
  read -r uid mode < <(stat -c '%u %a' -- "$d")
  [[ $uid == "$(id -u)" ]] || die "$d belongs to uid $uid; expected uid $(id -u)"
  (( (8#$mode & 8#022) == 0 )) || die "$d is writable by group or others (mode $mode); expected 0700"
}

# --state DIR: made (mode 0700) or checked; $state becomes its resolved path.
use_given_state() {
  local parent base
  base=$(basename -- "$state")
  [[ $base != . && $base != .. && $base != / ]] || die "--state $state: expected a directory name"
  parent=$(realpath -e -- "$(dirname -- "$state")") || die "--state $state: its parent does not exist"
  safe_ancestors "$parent"
  state=${parent%/}/$base
  if [[ ! -e $state && ! -L $state ]]; then
    mkdir -m 700 -- "$state"   # fails rather than follow anything made meanwhile
  fi
  private_dir "$state"
}

# The state of a running cluster of this prefix, from --state or the pointer.
find_state() {
  if (( state_given )); then
    [[ -e $state || -L $state ]] || return 1
    use_given_state
    return 0
  fi
  [[ -f $pointer && ! -L $pointer ]] || return 1
  private_dir "$pointer_dir"
  state=$(cat -- "$pointer")
  [[ $state == /* ]] || die "$pointer holds '$state'; expected an absolute path"
  if [[ ! -e $state && ! -L $state ]]; then
    echo "netns-cluster: $state (from $pointer) is gone; forgetting it" >&2
    rm -f -- "$pointer"
    return 1
  fi
  safe_ancestors "$(dirname -- "$state")"
  private_dir "$state"
}

# A fresh state for `up` or `run`.
new_state() {
  if (( state_given )); then
    use_given_state
    [[ ! -e $state/namespaces ]] \
      || die "$state/namespaces exists: a cluster from this state is up; run down first"
    rm -f -- "$state"/*.pid "$state/nodes"   # left by a process that died, not by down
    return 0
  fi
  if [[ -e $pointer ]]; then
    die "a cluster with prefix $prefix is up (state $(cat -- "$pointer" 2>/dev/null || echo '?')); run down first or use another --prefix"
  fi
  local tmp=${TMPDIR:-/tmp}
  safe_ancestors "$(realpath -e -- "$tmp")"
  state=$(mktemp -d -- "$(realpath -e -- "$tmp")/kvferry-netns-$prefix.XXXXXX")
  made_tmp=1
  private_dir "$state"
}

record_pointer() {
  (( state_given )) && return 0
  safe_ancestors "$(dirname -- "$pointer_dir")"
  if [[ ! -e $pointer_dir && ! -L $pointer_dir ]]; then mkdir -m 700 -- "$pointer_dir"; fi
  private_dir "$pointer_dir"
  # A fresh file beside it, renamed over: never opens an existing path.
  local t
  t=$(mktemp -- "$pointer_dir/.$prefix.XXXXXX")
  printf '%s\n' "$state" > "$t"
  mv -fT -- "$t" "$pointer"
}

drop_pointer() {
  (( state_given )) && return 0
  [[ -f $pointer && ! -L $pointer ]] && rm -f -- "$pointer"
  return 0
}

# "NAME HOST" per node of the file.
nodes() { "$launch" --cluster="$file" --list-nodes; }

up() {
  need_root
  new_state
  armed=1
  local list
  list=$(nodes)
  [[ -n $list ]] || die "$file has no nodes"
  local first_host
  first_host=$(echo "$list" | head -1 | cut -d' ' -f2)
  local net=${first_host%.*}
  : > "$state/nodes"
  ip netns add "$prefix-hub"
  echo "$prefix-hub" > "$state/namespaces"
  record_pointer
  ip -n "$prefix-hub" link set lo up
  ip -n "$prefix-hub" link add br0 type bridge
  ip -n "$prefix-hub" addr add "$net.254/24" dev br0
  ip -n "$prefix-hub" link set br0 up
  local k=0
  while read -r name host; do
    k=$((k + 1))
    plain_name "$name" || die "node name '$name' is not a plain name (letters, digits, . _ -); it names files in $state"
    [[ ${host%.*} == "$net" ]] || die "node $name's host $host is not in $net.0/24"
    local ns="$prefix-n$k"
    ip netns add "$ns"
    echo "$ns" >> "$state/namespaces"
    ip link add "${prefix}${k}n" netns "$ns" type veth peer name "${prefix}${k}h" netns "$prefix-hub"
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$host/24" dev "${prefix}${k}n"
    ip -n "$ns" link set "${prefix}${k}n" up
    ip -n "$prefix-hub" link set "${prefix}${k}h" master br0
    ip -n "$prefix-hub" link set "${prefix}${k}h" up
    echo "$name $ns $host" >> "$state/nodes"
  done <<< "$list"
  # One clock origin for a paced workload, far enough ahead that every node's
  # ranks are up before the first room (NETNS_EPOCH_LEAD_S, default 8 s: with
  # 1 s, a loaded machine's prefill scheduler opened the first rooms after
  # their 3 s deadline, seen in the flake hunt of issue 30).
  local lead=${NETNS_EPOCH_LEAD_S:-8}
  [[ $lead =~ ^[0-9]+$ ]] || die "NETNS_EPOCH_LEAD_S is '$lead'; expected whole seconds"
  local epoch=$(( $(date +%s%N) + lead * 1000000000 ))
  while read -r name ns host; do
    ip netns exec "$ns" "$launch" --cluster="$file" --node="$name" --epoch-ns="$epoch" \
      "${extra[@]}" > "$state/$name.log" 2>&1 &
    echo $! > "$state/$name.pid"
    echo "netns-cluster: node $name in $ns ($host), pid $!, log $state/$name.log"
  done < "$state/nodes"
}

pid_of() {
  local p
  p=$(cat -- "$1")
  [[ $p =~ ^[0-9]+$ ]] || die "$1 holds '$p'; expected a process id"
  echo "$p"
}

alive() { [[ -f $1 ]] && kill -0 "$(pid_of "$1")" 2>/dev/null; }

wait_nodes() {
  for p in "$state"/*.pid; do
    while alive "$p"; do sleep 0.2; done
  done
}

down() {
  for p in "$state"/*.pid; do
    [[ -f $p ]] || continue
    if alive "$p"; then kill -TERM "$(pid_of "$p")" 2>/dev/null || true; fi
  done
  for p in "$state"/*.pid; do
    [[ -f $p ]] || continue
    for _ in $(seq 50); do alive "$p" || break; sleep 0.1; done
    if alive "$p"; then kill -KILL "$(pid_of "$p")" 2>/dev/null || true; fi
    rm -f -- "$p"
  done
  if [[ -f $state/namespaces ]]; then
    while read -r ns; do ip netns del "$ns" 2>/dev/null || true; done < "$state/namespaces"
    rm -f -- "$state/namespaces" "$state/nodes"
  fi
  drop_pointer
}

# Trap of a failed or interrupted `up`: undo what it made, and only that.
undo_up() {
  local rc=$?
  trap - EXIT
  if (( rc != 0 && armed )); then
    down
    if (( made_tmp )); then rm -rf -- "$state"; fi
  fi
  exit "$rc"
}

logs_printed=0
# Trap of `run`: always down; its own temporary directory goes once the logs
# have been printed.
end_run() {
  local rc=$?
  trap - EXIT
  if (( armed )); then
    down
    if (( made_tmp && logs_printed )); then
      rm -rf -- "$state"
    else
      echo "netns-cluster: logs kept in $state" >&2
    fi
  fi
  exit "$rc"
}

case $cmd in
  up)
    trap undo_up EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    up
    trap - EXIT INT TERM ;;
  down)
    if find_state; then
      down
      if (( ! state_given )); then echo "netns-cluster: down; logs kept in $state"; fi
    else
      echo "netns-cluster: no cluster with prefix $prefix is up"
    fi ;;
  wait)
    find_state || die "no cluster with prefix $prefix is up"
    wait_nodes ;;
  kill)
    plain_name "$node_arg" || die "'$node_arg' is not a node name"
    find_state || die "no cluster with prefix $prefix is up"
    [[ -f $state/$node_arg.pid ]] || die "no node $node_arg running"
    kill -KILL "$(pid_of "$state/$node_arg.pid")"
    echo "netns-cluster: killed node $node_arg" ;;
  cut | heal)
    plain_name "$node_arg" || die "'$node_arg' is not a node name"
    find_state || die "no cluster with prefix $prefix is up"
    line=$(grep -n "^$node_arg " "$state/nodes" | cut -d: -f1)
    [[ -n $line ]] || die "no node $node_arg in this cluster"
    ns=$(sed -n "${line}p" "$state/nodes" | cut -d' ' -f2)
    if [[ $cmd == cut ]]; then updown=down; else updown=up; fi
    ip -n "$ns" link set "${prefix}${line}n" "$updown"
    echo "netns-cluster: link of node $node_arg $updown" ;;
  status) ip netns exec "$prefix-hub" "$ctl" --cluster="$file" status ;;
  run)
    trap end_run EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    up
    rc=0
    while read -r name ns host; do
      code=0
      wait "$(pid_of "$state/$name.pid")" || code=$?
      echo "== node $name ($host, $ns): exit $code"
      cat -- "$state/$name.log"
      (( code == 0 )) || rc=1
    done < "$state/nodes"
    logs_printed=1
    exit $rc ;;
  *) die "unknown command $cmd; expected run, up, status, kill, cut, heal, wait or down" ;;
esac
