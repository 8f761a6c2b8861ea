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
#   deploy/netns-cluster.sh wait FILE       until every node process has exited
#   deploy/netns-cluster.sh down FILE       stop the nodes, delete the namespaces
#
# Options (before the command): --prefix P (namespaces P-hub, P-n1...; default
# kvf; at most 8 characters), --state DIR (logs and pids; default
# /tmp/kvferry-netns-P), --bin DIR (where kvferry-launch and kvferry-ctl are;
# default build/apps). Arguments after -- go to every kvferry-launch.
# deploy/clusters/netns-3node.toml uses the addresses 10.77.0.1-3.
set -euo pipefail

prefix=kvf
state=""
bin="build/apps"
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --prefix) prefix=$2; shift 2 ;;
    --state) state=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    *) echo "netns-cluster: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $# -ge 2 ]] || { sed -n '2,22p' "$0" >&2; exit 2; }
cmd=$1
file=$2
shift 2
node_arg=""
if [[ $cmd == kill ]]; then node_arg=${1:?kill needs a node name}; shift; fi
[[ ${1:-} == -- ]] && shift
extra=("$@")
state=${state:-/tmp/kvferry-netns-$prefix}
launch="$bin/kvferry-launch"
ctl="$bin/kvferry-ctl"
(( ${#prefix} <= 8 )) || { echo "netns-cluster: --prefix $prefix is longer than 8 characters" >&2; exit 2; }

need_root() {
  if [[ $(id -u) -ne 0 ]]; then echo "netns-cluster: needs root (ip netns)" >&2; exit 3; fi
  if ! ip netns list >/dev/null 2>&1; then echo "netns-cluster: ip netns does not work here" >&2; exit 3; fi
}

# "NAME HOST" per node of the file.
nodes() { "$launch" --cluster="$file" --list-nodes; }

up() {
  need_root
  mkdir -p "$state"
  local list
  list=$(nodes)
  local first_host
  first_host=$(echo "$list" | head -1 | cut -d' ' -f2)
  local net=${first_host%.*}
  ip netns add "$prefix-hub"
  echo "$prefix-hub" > "$state/namespaces"
  ip -n "$prefix-hub" link set lo up
  ip -n "$prefix-hub" link add br0 type bridge
  ip -n "$prefix-hub" addr add "$net.254/24" dev br0
  ip -n "$prefix-hub" link set br0 up
  local k=0
  while read -r name host; do
    k=$((k + 1))
    [[ ${host%.*} == "$net" ]] || { echo "netns-cluster: node $name's host $host is not in $net.0/24" >&2; exit 2; }
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
  # One clock origin for a paced workload, a moment ahead.
  local epoch=$(( $(date +%s%N) + 1000000000 ))
  while read -r name ns host; do
    ip netns exec "$ns" "$launch" --cluster="$file" --node="$name" --epoch-ns="$epoch" \
      "${extra[@]}" > "$state/$name.log" 2>&1 &
    echo $! > "$state/$name.pid"
    echo "netns-cluster: node $name in $ns ($host), pid $!, log $state/$name.log"
  done < "$state/nodes"
}

alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_nodes() {
  for p in "$state"/*.pid; do
    while alive "$p"; do sleep 0.2; done
  done
}

down() {
  for p in "$state"/*.pid; do
    [[ -f $p ]] || continue
    if alive "$p"; then kill -TERM "$(cat "$p")" 2>/dev/null || true; fi
  done
  for p in "$state"/*.pid; do
    [[ -f $p ]] || continue
    for _ in $(seq 50); do alive "$p" || break; sleep 0.1; done
    if alive "$p"; then kill -KILL "$(cat "$p")" 2>/dev/null || true; fi
    rm -f "$p"
  done
  if [[ -f $state/namespaces ]]; then
    while read -r ns; do ip netns del "$ns" 2>/dev/null || true; done < "$state/namespaces"
    rm -f "$state/namespaces" "$state/nodes"
  fi
}

case $cmd in
  up) up ;;
  down) down ;;
  wait) wait_nodes ;;
  kill)
    [[ -f $state/$node_arg.pid ]] || { echo "netns-cluster: no node $node_arg running" >&2; exit 2; }
    kill -KILL "$(cat "$state/$node_arg.pid")"
    echo "netns-cluster: killed node $node_arg" ;;
  status) ip netns exec "$prefix-hub" "$ctl" --cluster="$file" status ;;
  run)
    trap down EXIT INT TERM
    up
    rc=0
    while read -r name ns host; do
      code=0
      wait "$(cat "$state/$name.pid")" || code=$?
      echo "== node $name ($host, $ns): exit $code"
      cat "$state/$name.log"
      (( code == 0 )) || rc=1
    done < "$state/nodes"
    exit $rc ;;
  *) echo "netns-cluster: unknown command $cmd; expected run, up, status, kill, wait or down" >&2; exit 2 ;;
esac
