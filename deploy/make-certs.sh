#!/usr/bin/env bash
# Makes the certificates of a kvferry cluster with the openssl CLI: a private
# cluster CA, and one certificate and key per [[node]] of a cluster file.
#
#   deploy/make-certs.sh CLUSTER_FILE OUT_DIR [--days N] [--force | --reuse-ca]
#
# Writes, in OUT_DIR (made with mode 0700 if missing):
#   ca.pem            the CA certificate: every node's cafile
#   ca.key            the CA's key (0600): keep it off the nodes
#   NODE.pem          per node: CN=NODE (the [[node]]'s name), subjectAltName
#                     from its host (IP: for an address, DNS: for a name),
#                     extendedKeyUsage serverAuth and clientAuth, signed by the CA
#   NODE.key          that node's key (0600)
#   ctl.pem, ctl.key  kvferry-ctl's identity (CN=ctl, DNS:kvferry-ctl), signed
#                     by the CA: what `kvferry-ctl --cluster FILE status` shows
#                     the nodes under [tls] (its --identity picks another)
# Keys are ECDSA P-256; certificates are valid for --days N (default 825).
#
# It refuses to replace an existing ca.key: --force makes a new CA (then every
# node's certificate is made again and the old ones are no longer trusted by
# it); --reuse-ca signs the nodes' certificates with the CA already in OUT_DIR
# (to add a node, or renew one, without touching the others' trust).
#
# Everything is made in a private directory inside OUT_DIR and moved into
# place at the end, so a failure leaves OUT_DIR as it was, and an existing
# path (a symlink too) is replaced, never written through. The cluster file is
# read with awk (no TOML library): [[node]] tables with name = "..." and
# host = "..." on lines of their own, as in deploy/clusters/*.toml.
set -euo pipefail
umask 077

me=make-certs
usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
  exit 2
}
die() { echo "$me: $*" >&2; exit 2; }

days=825
force=0
reuse=0
args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --days)
      [[ $# -ge 2 ]] || die "--days needs a number of days"
      days=$2; shift 2 ;;
    --days=*) days=${1#--days=}; shift ;;
    --force) force=1; shift ;;
    --reuse-ca) reuse=1; shift ;;
    -h|--help) usage ;;
    --) shift; args+=("$@"); break ;;
    -*) die "unknown option $1; expected --days N, --force or --reuse-ca" ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ ${#args[@]} -eq 2 ]] || usage
cluster=${args[0]}
out=${args[1]}
if [[ ! $days =~ ^[0-9]+$ ]] || (( 10#$days < 1 || 10#$days > 36500 )); then
  die "--days $days: expected a whole number of days from 1 to 36500"
fi
days=$((10#$days))
(( force + reuse <= 1 )) || die "--force and --reuse-ca exclude each other: --force makes a new CA, --reuse-ca keeps the one in $out"
command -v openssl >/dev/null 2>&1 || die "openssl not found on PATH; expected the openssl command-line tool (Debian: apt-get install openssl)"
[[ -f $cluster && -r $cluster ]] || die "cluster file $cluster: not a readable file"

# ---- the nodes of the cluster file: "NAME<TAB>HOST<TAB>LINE" per [[node]] ----

# Errors come out as "ERR<TAB>LINE<TAB>message", so that the shell names them.
node_list=$(awk '
  function err(line, msg) { printf "ERR\t%d\t%s\n", line, msg; bad = 1 }
  # The line without a comment that is outside a string.
  function uncomment(s,    i, c, q, out) {
    q = ""; out = ""
    for (i = 1; i <= length(s); i++) {
      c = substr(s, i, 1)
      if (q == "" && c == "#") break
      if (q == "\"" && c == "\\") { out = out c substr(s, i + 1, 1); i++; continue }
      if (q == "" && (c == "\"" || c == sq)) q = c
      else if (q != "" && c == q) q = ""
      out = out c
    }
    return out
  }
  function flush() {
    if (in_node) {
      if (name == "") err(node_line, "[[node]] has no name = \"...\"; expected one")
      else if (host == "") err(node_line, "[[node]] \"" name "\" has no host = \"...\"; expected one")
      else printf "%s\t%s\t%d\n", name, host, node_line
    }
    in_node = 0; name = ""; host = ""
  }
  # A TOML string value: "basic" (no escapes) or literal (in single quotes); else an error.
  function str(v, key, line,    q, rest, end) {
    sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v)
    q = substr(v, 1, 1)
    if (q != "\"" && q != sq) { err(line, key " = " v ": expected a quoted string"); return "" }
    rest = substr(v, 2); end = index(rest, q)
    if (end == 0) { err(line, key " = " v ": the string is not closed on its line"); return "" }
    if (end != length(rest)) { err(line, key " = " v ": expected nothing after the string"); return "" }
    v = substr(rest, 1, end - 1)
    if (q == "\"" && index(v, "\\")) { err(line, key " = " v ": escapes are not supported here; expected a plain name or address"); return "" }
    if (v == "") { err(line, key " is empty; expected a " (key == "host" ? "host name or address" : "node name")) }
    return v
  }
  BEGIN { sq = sprintf("%c", 39); top = 1 }
  {
    line = uncomment($0)
    if (line ~ /^[ \t]*\[\[[ \t]*node[ \t]*\]\][ \t]*$/) { flush(); top = 0; in_node = 1; node_line = NR; next }
    if (line ~ /^[ \t]*\[/) { flush(); top = 0; next }
    if (line !~ /=/) next
    key = line; sub(/=.*/, "", key); gsub("[ \t\"" sq "]", "", key)
    value = line; sub(/^[^=]*=/, "", value)
    if (in_node && key == "name") { if (name != "") err(NR, "name given twice in one [[node]]"); name = str(value, "name", NR) }
    else if (in_node && key == "host") { if (host != "") err(NR, "host given twice in one [[node]]"); host = str(value, "host", NR) }
    else if (top && key == "node") err(NR, "node = ...: expected the nodes as [[node]] tables")
  }
  END { flush(); exit bad }
' "$cluster") || {
  echo "$node_list" | awk -F'\t' -v f="$cluster" -v me="$me" '$1 == "ERR" { print me ": " f ":" $2 ": " $3 }' >&2
  exit 2
}
[[ -n $node_list ]] || die "$cluster: no [[node]] tables; expected at least one, with name = \"...\" and host = \"...\""

names=()
hosts=()
declare -A seen=()
while IFS=$'\t' read -r name host line; do
  [[ $name =~ ^[A-Za-z0-9_][A-Za-z0-9._-]*$ ]] \
    || die "$cluster:$line: node name \"$name\": expected letters, digits, '.', '_' and '-' only (it names the node's files and is its certificate's CN)"
  (( ${#name} <= 64 )) || die "$cluster:$line: node name \"$name\" has ${#name} characters; expected at most 64 (the limit of a CN)"
  [[ $name != ctl ]] || die "$cluster:$line: node name \"ctl\" is kvferry-ctl's identity; expected another name"
  [[ -z ${seen[$name]:-} ]] || die "$cluster:$line: node name \"$name\" is also the name of the node at line ${seen[$name]}; expected unique names"
  seen[$name]=$line
  if [[ $host =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    IFS=. read -r a b c d <<< "$host"
    for o in "$a" "$b" "$c" "$d"; do
      (( 10#$o <= 255 )) || die "$cluster:$line: host \"$host\" of node \"$name\": expected an IPv4 address with parts from 0 to 255"
    done
  elif [[ $host =~ ^[0-9.]+$ ]]; then
    die "$cluster:$line: host \"$host\" of node \"$name\": expected an IPv4 address of four parts (a.b.c.d)"
  elif [[ $host == *:* ]]; then
    [[ $host =~ ^[0-9A-Fa-f:.]+$ ]] || die "$cluster:$line: host \"$host\" of node \"$name\": expected an IPv6 address (hex digits and ':'), an IPv4 address or a DNS name"
  else
    label='[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?'
    if [[ ! $host =~ ^$label(\.$label)*\.?$ ]] || (( ${#host} > 253 )); then
      die "$cluster:$line: host \"$host\" of node \"$name\": expected a DNS name (labels of letters, digits and '-', joined by '.'), or an IP address"
    fi
  fi
  names+=("$name")
  hosts+=("$host")
done <<< "$node_list"

# ---- the output directory, and a private working directory inside it ----

if [[ -L $out ]]; then die "$out is a symlink; expected a directory (or a path to make one at)"; fi
if [[ ! -e $out ]]; then mkdir -p -- "$out"; fi   # 0700, by the umask
[[ -d $out ]] || die "$out exists and is not a directory"
read -r out_mode < <(stat -c '%a' -- "$out")
if (( (8#$out_mode & 8#022) != 0 )); then
  die "$out is writable by others (mode $out_mode); expected a directory only its owner can write (it holds keys)"
fi
if [[ -e $out/ca.key || -L $out/ca.key ]]; then
  if (( ! force && ! reuse )); then
    die "$out/ca.key exists; expected a directory without a CA, or --reuse-ca to sign with it, or --force to make a new CA (every node's certificate is then made again)"
  fi
elif (( reuse )); then
  die "--reuse-ca: $out/ca.key does not exist; expected the CA made earlier by $me in $out"
fi
if (( reuse )); then
  [[ -f $out/ca.pem ]] || die "--reuse-ca: $out/ca.pem does not exist; expected the CA certificate beside ca.key"
fi

work=$(mktemp -d -- "$out/.make-certs.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# Our own configuration: nothing from the host's openssl.cnf (or OPENSSL_CONF)
# slips into the certificates.
cat > "$work/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[node]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = $ENV::KVFERRY_SAN
EOF
export OPENSSL_CONF=$work/openssl.cnf
export KVFERRY_SAN=""

ossl() {
  local log=$work/openssl.log
  if ! openssl "$@" > "$log" 2>&1; then
    echo "$me: openssl $1 failed:" >&2
    cat "$log" >&2
    exit 1
  fi
}
serial() { echo "0x$(openssl rand -hex 16)"; }

made=()
if (( reuse )); then
  ca_pem=$out/ca.pem
  ca_key=$out/ca.key
  ossl x509 -in "$ca_pem" -noout
  ossl pkey -in "$ca_key" -noout
else
  ca_pem=$work/ca.pem
  ca_key=$work/ca.key
  ca_cn=$(basename -- "$cluster" .toml)
  ca_cn="kvferry cluster CA ${ca_cn//[^A-Za-z0-9._-]/_}"
  ossl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$ca_key"
  ossl req -new -x509 -config "$work/openssl.cnf" -extensions ca -key "$ca_key" -sha256 \
    -days "$days" -set_serial "$(serial)" -subj "/CN=${ca_cn:0:64}" -out "$ca_pem"
  made+=("ca.pem" "ca.key")
fi

# kvferry-ctl's identity rides along as one more "node" with a DNS name.
names+=("ctl")
hosts+=("kvferry-ctl")
for k in "${!names[@]}"; do
  name=${names[$k]}
  host=${hosts[$k]}
  if [[ $host == *:* || $host =~ ^[0-9.]+$ ]]; then KVFERRY_SAN="IP:$host"; else KVFERRY_SAN="DNS:${host%.}"; fi
  ossl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/$name.key"
  ossl req -new -config "$work/openssl.cnf" -key "$work/$name.key" -sha256 -subj "/CN=$name" \
    -out "$work/$name.csr"
  ossl x509 -req -in "$work/$name.csr" -CA "$ca_pem" -CAkey "$ca_key" -set_serial "$(serial)" \
    -sha256 -days "$days" -extfile "$work/openssl.cnf" -extensions node -out "$work/$name.pem"
  ossl verify -CAfile "$ca_pem" -purpose sslserver "$work/$name.pem"
  ossl verify -CAfile "$ca_pem" -purpose sslclient "$work/$name.pem"
  rm -f -- "$work/$name.csr"
  made+=("$name.pem" "$name.key")
done

# Into place: rename(2) replaces a path (a symlink too), never writes through it.
for f in "${made[@]}"; do
  case $f in
    *.key) chmod 600 -- "$work/$f" ;;
    *) chmod 644 -- "$work/$f" ;;
  esac
  mv -fT -- "$work/$f" "$out/$f"
done

if (( reuse )); then
  echo "$me: signed with the existing CA $out/ca.pem"
else
  echo "$me: $out/ca.pem  CA certificate (CN=${ca_cn:0:64}, $days days): every node's cafile"
  echo "$me: $out/ca.key  CA key (0600): keep it off the nodes"
fi
for k in "${!names[@]}"; do
  name=${names[$k]}
  host=${hosts[$k]}
  if [[ $host == *:* || $host =~ ^[0-9.]+$ ]]; then san="IP:$host"; else san="DNS:${host%.}"; fi
  echo "$me: $out/$name.pem  node $name (CN=$name, $san, serverAuth+clientAuth, $days days)"
  echo "$me: $out/$name.key  its key (0600)"
done
# A new CA leaves the certificates of nodes that are not in this file behind,
# no longer trusted: say which.
if (( force )); then
  for f in "$out"/*.pem; do
    [[ -f $f ]] || continue
    n=$(basename -- "$f" .pem)
    [[ $n == ca || $n == ctl || -n ${seen[$n]:-} ]] && continue
    echo "$me: note: $f is not a node of $cluster and was signed by the old CA; remove it, or remake it with --reuse-ca and its cluster file" >&2
  done
fi
