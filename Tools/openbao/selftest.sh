#!/usr/bin/env bash
# selftest.sh: checks lab.sh against real OpenBao servers, end to end, on 127.0.0.1 only.
#
#   Tools/openbao/selftest.sh [TOOLS_DIR]
#
# TOOLS_DIR (default: a temporary directory, removed at the end) receives OpenBao through
# `lab.sh install`. Every lab it starts lives in a temporary directory and is stopped at the
# end, on failure too. Prints one line per check, the times measured, and a closing
# "N passed, N failed" line; exits 0 only if every check passed (3 if OpenBao cannot be
# installed here). Takes about a minute.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
LAB=$HERE/lab.sh
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kc-openbao-selftest.XXXXXX")
TOOLS=${1:-$WORK/tools}
export LAB_TOOLS_DIR=$TOOLS
while read -r name; do unset "$name"; done < <(compgen -e | grep -E '^(BAO|VAULT)_' || true)

passed=0
failed=0
declare -A X
LABS=()
TIMES=()

ok() { passed=$(( passed + 1 )); echo "ok   $*"; }
bad() { failed=$(( failed + 1 )); echo "FAIL $*"; }
check() { # DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
now_ms() { date +%s%3N; }

cleanup() { # stops every lab, removes WORK (and so the default TOOLS_DIR, not a given one)
    local d
    for d in "${LABS[@]}"; do "$LAB" stop "$d" >/dev/null 2>&1; done
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/labs"

# run_lab NAME ARGS...: runs lab.sh, keeps its KEY=VALUE output in the array named NAME
# (as NAME[KEY]), its stderr in $WORK/NAME.err; returns lab.sh's status; LAST_MS its time.
# shellcheck disable=SC2034 # out is a nameref: the caller reads what it holds
run_lab() {
    local -n out=$1
    shift
    local line t0 status
    out=()
    t0=$(now_ms)
    "$LAB" "$@" >"$WORK/last.out" 2>"$WORK/last.err"
    status=$?
    LAST_MS=$(( $(now_ms) - t0 ))
    while IFS= read -r line; do
        [[ $line == *=* ]] && out[${line%%=*}]=${line#*=}
    done <"$WORK/last.out"
    if (( status != 0 )); then sed 's/^/     | /' "$WORK/last.err"; fi
    return "$status"
}
new_lab_dir() { local d; d=$(mktemp -d "$WORK/labs/$1.XXXXXX"); LABS+=("$d"); echo "$d"; }

code() { # curl ARGS... -> HTTP status only (000 when no HTTP answer)
    curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@" || true
}
body() { curl -s --max-time 10 "$@" || true; }
jget() { /usr/bin/python3 -c '
import json, sys
value = json.load(sys.stdin)
for key in sys.argv[1].split("."):
    value = value[int(key)] if isinstance(value, list) else value[key]
print(value)' "$1" 2>/dev/null; }

# ---------------------------------------------------------------- install
declare -A I
echo "# install"
if ! run_lab I install "$TOOLS"; then
    status=$?
    echo "lab.sh install failed (exit $status); nothing else can be checked"
    echo "0 passed, 1 failed"
    exit "$status"
fi
BAO=${I[BAO]}
check "install prints BAO= an executable bao" test -x "$BAO"
check "bao is OpenBao v2.7.2" bash -c "'$BAO' version | grep -q 'OpenBao v2.7.2 '"
run_lab I install "$TOOLS"
check "a second install is fast (${LAST_MS} ms < 2000 ms)" test "$LAST_MS" -lt 2000
TIMES+=("install (present): ${LAST_MS} ms")
# No index and no wheel anywhere: pip cannot fetch it, which is exit status 3.
PIP_NO_INDEX=1 PIP_FIND_LINKS=$WORK/none "$LAB" install "$WORK/empty-tools" >/dev/null 2>"$WORK/pip.err"
status=$?
check "install exits 3 ($status) when pip cannot fetch the wheel: $(tail -1 "$WORK/pip.err")" test "$status" -eq 3

# ---------------------------------------------------------------- ca
declare -A C
echo "# ca"
CADIR=$(new_lab_dir ca)
run_lab C ca "$CADIR"
check "ca prints the ten files and they exist" bash -c "for f in '${C[CA]}' '${C[CA_KEY]}' '${C[SERVER_CERT]}' '${C[SERVER_KEY]}' '${C[CLIENT_CERT]}' '${C[CLIENT_KEY]}' '${C[OTHER_CA]}' '${C[OTHER_CA_KEY]}' '${C[OTHER_CLIENT_CERT]}' '${C[OTHER_CLIENT_KEY]}'; do test -s \"\$f\" || exit 1; done"
check "server and client certs verify against CA" openssl verify -CAfile "${C[CA]}" "${C[SERVER_CERT]}" "${C[CLIENT_CERT]}" >/dev/null
check "server cert does not verify against OTHER_CA" bash -c "! openssl verify -CAfile '${C[OTHER_CA]}' '${C[SERVER_CERT]}' >/dev/null 2>&1"
check "server cert names IP 127.0.0.1 and DNS localhost, serverAuth" bash -c "openssl x509 -in '${C[SERVER_CERT]}' -noout -ext subjectAltName | grep -q 'IP Address:127.0.0.1, DNS:localhost' && openssl x509 -in '${C[SERVER_CERT]}' -noout -ext extendedKeyUsage | grep -q 'Server Authentication'"
check "client cert is clientAuth" bash -c "openssl x509 -in '${C[CLIENT_CERT]}' -noout -ext extendedKeyUsage | grep -q 'Client Authentication'"

# ---------------------------------------------------------------- dev (plain HTTP)
declare -A D
echo "# dev"
DEV=$(new_lab_dir dev)
if run_lab D dev "$DEV"; then
    TIMES+=("dev: ${LAST_MS} ms")
    ok "dev starts (${LAST_MS} ms)"
    A=${D[BAO_ADDR]}
    check "dev listens on 127.0.0.1 over http" bash -c "[[ '$A' == http://127.0.0.1:* ]]"
    check "dev root token is root" test "${D[BAO_TOKEN]}" = root
    check "dev sys/health is 200" test "$(code "$A/v1/sys/health")" = 200
    check "dev: kv put with the root token" env BAO_ADDR="$A" BAO_TOKEN=root "$BAO" kv put secret/app a=1 >/dev/null
    login=$(body -X POST -d "{\"role_id\":\"${D[ROLE_ID]}\",\"secret_id\":\"${D[SECRET_ID]}\"}" "$A/v1/auth/approle/login")
    T=$(jget auth.client_token <<<"$login")
    check "dev: AppRole login with ROLE_ID/SECRET_ID" test -n "$T"
    check "dev: the kc-agent token reads secret/data/app" bash -c "curl -s -H 'X-Vault-Token: $T' '$A/v1/secret/data/app' | grep -q '\"a\":\"1\"'"
    check "dev: the kc-agent token lists secret/metadata/" test "$(code -H "X-Vault-Token: $T" -X LIST "$A/v1/secret/metadata/")" = 200
    check "dev: the kc-agent token may not write secrets (403)" test "$(code -H "X-Vault-Token: $T" -X PUT -d '{"data":{"b":"2"}}' "$A/v1/secret/data/app")" = 403
    check "dev: the kc-agent token looks itself up and renews itself" bash -c "test \$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Vault-Token: $T' '$A/v1/auth/token/lookup-self') = 200 && test \$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'X-Vault-Token: $T' '$A/v1/auth/token/renew-self') = 200"
    issue=$(body -X POST -H "X-Vault-Token: $T" -d '{"common_name":"web.example.test","ip_sans":"127.0.0.1","ttl":"10m"}' "$A/v1/pki/issue/web")
    lease=$(jget lease_id <<<"$issue")
    check "dev: pki/issue/web issues a certificate with a lease ($lease)" bash -c "[[ '$lease' == pki/issue/web/* ]]"
    check "dev: the issued certificate is for web.example.test" bash -c "python3 -c 'import json,sys; print(json.load(sys.stdin)[\"data\"][\"certificate\"])' <<<'$issue' | openssl x509 -noout -subject | grep -q web.example.test"
    # PKI leases are not renewable: the policy lets the agent ask (400, not 403).
    renew=$(body -X PUT -H "X-Vault-Token: $T" -d "{\"lease_id\":\"$lease\",\"increment\":300}" "$A/v1/sys/leases/renew")
    check "dev: the kc-agent token may call sys/leases/renew ($renew)" grep -q 'lease is not renewable' <<<"$renew"
    check "dev: a name outside example.test is refused (400)" test "$(code -X POST -H "X-Vault-Token: $T" -d '{"common_name":"evil.com"}' "$A/v1/pki/issue/web")" = 400
    run_lab X seal "$DEV"
    check "dev: seal; sys/health is 503" test "$(code "$A/v1/sys/health")" = 503
    check "dev: sealed, GET secret/metadata/X is 503" test "$(code -H 'X-Vault-Token: root' "$A/v1/secret/metadata/X")" = 503
    run_lab X unseal "$DEV"
    check "dev: unseal; sys/health is 200 and the secret is still there" bash -c "test \$(curl -s -o /dev/null -w '%{http_code}' '$A/v1/sys/health') = 200 && curl -s -H 'X-Vault-Token: root' '$A/v1/secret/data/app' | grep -q '\"a\":\"1\"'"
    check "dev: unsealed, GET secret/metadata/X is 404" test "$(code -H 'X-Vault-Token: root' "$A/v1/secret/metadata/X")" = 404
    PID=${D[PID]}
    run_lab X stop "$DEV"
    check "dev: stop kills the server and removes DIR" bash -c "! kill -0 $PID 2>/dev/null || grep -q '^State:.*Z' /proc/$PID/status; test ! -e '$DEV'"
    check "dev: stop again is fine" "$LAB" stop "$DEV" >/dev/null 2>&1
else
    bad "dev starts"
fi

# ---------------------------------------------------------------- a caller reading stdout to EOF
echo "# stdout reaches EOF"
PIPE=$(new_lab_dir pipe)
t0=$(now_ms)
timeout 90 bash -c "'$LAB' dev '$PIPE' 2>/dev/null | cat >/dev/null"
status=$?
check "lab.sh dev | cat ends as soon as lab.sh does ($(( $(now_ms) - t0 )) ms, status $status)" test "$status" -eq 0
"$LAB" stop "$PIPE" >/dev/null 2>&1

# ---------------------------------------------------------------- dev --tls
declare -A S
echo "# dev --tls"
TLS=$(new_lab_dir tls)
if run_lab S dev "$TLS" --tls; then
    TIMES+=("dev --tls: ${LAST_MS} ms")
    ok "dev --tls starts (${LAST_MS} ms)"
    A=${S[BAO_ADDR]}
    check "dev --tls listens on https://127.0.0.1" bash -c "[[ '$A' == https://127.0.0.1:* ]]"
    check "dev --tls: curl --cacert BAO_CACERT gets 200" test "$(code --cacert "${S[BAO_CACERT]}" "$A/v1/sys/health")" = 200
    check "dev --tls: https://localhost verifies too" test "$(code --cacert "${S[BAO_CACERT]}" "https://localhost:${A##*:}/v1/sys/health")" = 200
    curl -s -o /dev/null --cacert "$TLS/other-ca.pem" "$A/v1/sys/health"
    check "dev --tls: curl --cacert other-ca.pem fails verification (curl exit 60)" test $? -eq 60
    check "dev --tls: plain http is not served (400)" test "$(code "http://${A#https://}/v1/sys/health")" = 400
    check "dev --tls: bao kv put/get with BAO_CACERT" bash -c "BAO_ADDR='$A' BAO_TOKEN='${S[BAO_TOKEN]}' BAO_CACERT='${S[BAO_CACERT]}' '$BAO' kv put secret/app a=1 >/dev/null && test \$(BAO_ADDR='$A' BAO_TOKEN='${S[BAO_TOKEN]}' BAO_CACERT='${S[BAO_CACERT]}' '$BAO' kv get -field=a secret/app) = 1"
    check "dev --tls: AppRole login" bash -c "BAO_ADDR='$A' BAO_CACERT='${S[BAO_CACERT]}' '$BAO' write -field=token auth/approle/login role_id='${S[ROLE_ID]}' secret_id='${S[SECRET_ID]}' | grep -q ."
else
    bad "dev --tls starts"
fi

# ---------------------------------------------------------------- two labs at once
echo "# two labs in parallel"
PA=$(new_lab_dir par1)
PB=$(new_lab_dir par2)
"$LAB" dev "$PA" --tls >"$WORK/pa.out" 2>"$WORK/pa.err" &
pa=$!
"$LAB" dev "$PB" >"$WORK/pb.out" 2>"$WORK/pb.err" &
pb=$!
wait $pa; sa=$?
wait $pb; sb=$?
check "two labs start at the same time (exit $sa and $sb)" test "$sa$sb" = 00
a1=$(sed -n 's/^BAO_ADDR=//p' "$WORK/pa.out"); a2=$(sed -n 's/^BAO_ADDR=//p' "$WORK/pb.out")
check "they use different ports (${a1##*:} and ${a2##*:}) and both answer" bash -c "[[ '${a1##*:}' != '${a2##*:}' ]] && test \$(curl -s -o /dev/null -w '%{http_code}' --cacert '$PA/ca.pem' '$a1/v1/sys/health') = 200 && test \$(curl -s -o /dev/null -w '%{http_code}' '$a2/v1/sys/health') = 200"
"$LAB" stop "$PA" >/dev/null 2>&1
"$LAB" stop "$PB" >/dev/null 2>&1
"$LAB" stop "$TLS" >/dev/null 2>&1

# ---------------------------------------------------------------- dev --require-client-cert
declare -A M
echo "# dev --require-client-cert"
MT=$(new_lab_dir mtls)
if run_lab M dev "$MT" --require-client-cert; then
    TIMES+=("dev --require-client-cert: ${LAST_MS} ms")
    ok "dev --require-client-cert starts (${LAST_MS} ms)"
    A=${M[BAO_ADDR]}
    check "mTLS: a request without a client certificate is refused" test "$(code --cacert "${M[BAO_CACERT]}" "$A/v1/sys/health")" = 000
    check "mTLS: a client certificate from the other CA is refused" test "$(code --cacert "${M[BAO_CACERT]}" --cert "$MT/other-client.pem" --key "$MT/other-client-key.pem" "$A/v1/sys/health")" = 000
    check "mTLS: with BAO_CLIENT_CERT/BAO_CLIENT_KEY it succeeds (200)" test "$(code --cacert "${M[BAO_CACERT]}" --cert "${M[BAO_CLIENT_CERT]}" --key "${M[BAO_CLIENT_KEY]}" "$A/v1/sys/health")" = 200
    check "mTLS: bao CLI with the client certificate reads KV" bash -c "BAO_ADDR='$A' BAO_TOKEN='${M[BAO_TOKEN]}' BAO_CACERT='${M[BAO_CACERT]}' BAO_CLIENT_CERT='${M[BAO_CLIENT_CERT]}' BAO_CLIENT_KEY='${M[BAO_CLIENT_KEY]}' '$BAO' kv put secret/app a=1 >/dev/null"
    "$LAB" stop "$MT" >/dev/null 2>&1
else
    bad "dev --require-client-cert starts"
fi

# ---------------------------------------------------------------- cluster --tls
declare -A K
echo "# cluster --tls"
CL=$(new_lab_dir cluster)
if run_lab K cluster "$CL" --tls; then
    TIMES+=("cluster --tls: ${LAST_MS} ms")
    ok "cluster --tls starts (${LAST_MS} ms)"
    CA=${K[BAO_CACERT]}
    TOK=${K[BAO_TOKEN]}
    L=${K[BAO_ADDR]}
    bao_env=(env BAO_ADDR="$L" BAO_TOKEN="$TOK" BAO_CACERT="$CA")
    for n in 1 2 3; do
        a=${K[NODE${n}_ADDR]}
        c=$(code --cacert "$CA" "$a/v1/sys/health")
        if [[ $a == "$L" ]]; then want=200; else want=429; fi
        check "cluster: node$n $a answers sys/health $c (leader 200, standby 429)" test "$c" = "$want"
    done
    check "cluster: state.env holds the cluster" bash -c "grep -q '^NODE3_PID=' '$CL/state.env' && grep -q '^UNSEAL_KEY=' '$CL/state.env'"
    peers=$("${bao_env[@]}" "$BAO" operator raft list-peers -format=json)
    check "cluster: list-peers shows three voters and one leader" bash -c "python3 -c 'import json,sys; s=json.load(sys.stdin)[\"data\"][\"config\"][\"servers\"]; sys.exit(not (sum(x[\"voter\"] for x in s)==3 and sum(x[\"leader\"] for x in s)==1))' <<<'$peers'"
    "${bao_env[@]}" "$BAO" operator raft list-peers | sed 's/^/     | /'
    declare -A LD
    run_lab LD leader "$CL"
    check "leader prints the leader's address and pid" test "${LD[LEADER_ADDR]}" = "$L"
    check "cluster: bao kv put secret/app a=1 via the leader" "${bao_env[@]}" "$BAO" kv put secret/app a=1 >/dev/null
    SB=""
    for n in 1 2 3; do [[ ${K[NODE${n}_ADDR]} != "$L" ]] && { SB=${K[NODE${n}_ADDR]}; break; }; done
    # A standby serves reads from its own copy: a write shows up there some ms later.
    t0=$(now_ms); seen=""
    while (( $(now_ms) - t0 < 5000 )); do
        if body --cacert "$CA" -H "X-Vault-Token: $TOK" "$SB/v1/secret/data/app" | grep -q '"a":"1"'; then seen=$(( $(now_ms) - t0 )); break; fi
        sleep 0.02
    done
    check "cluster: the standby $SB reads secret/app (visible after ${seen:-never} ms)" test -n "$seen"
    TIMES+=("write on leader visible on a standby: ${seen:-never} ms")
    check "cluster: standby GET secret/metadata/X is 404" test "$(code --cacert "$CA" -H "X-Vault-Token: $TOK" "$SB/v1/secret/metadata/X")" = 404
    check "cluster: a write sent to the standby is forwarded (200)" test "$(code --cacert "$CA" -H "X-Vault-Token: $TOK" -X PUT -d '{"data":{"b":"2"}}' "$SB/v1/secret/data/fwd")" = 200
    check "cluster: with X-Vault-No-Request-Forwarding the standby redirects a write (307)" test "$(code --cacert "$CA" -H "X-Vault-Token: $TOK" -H 'X-Vault-No-Request-Forwarding: 1' -X PUT -d '{"data":{"b":"3"}}' "$SB/v1/secret/data/fwd")" = 307
    login=$(body --cacert "$CA" -X POST -d "{\"role_id\":\"${K[ROLE_ID]}\",\"secret_id\":\"${K[SECRET_ID]}\"}" "$SB/v1/auth/approle/login")
    T=$(jget auth.client_token <<<"$login")
    check "cluster: AppRole login (sent to a standby) works" test -n "$T"
    issue=$(body --cacert "$CA" -X POST -H "X-Vault-Token: $T" -d '{"common_name":"a.example.test","ttl":"10m"}' "$L/v1/pki/issue/web")
    lease=$(jget lease_id <<<"$issue")
    check "cluster: pki/issue/web issues a certificate with a lease ($lease)" bash -c "[[ '$lease' == pki/issue/web/* ]]"
    check "cluster: the kc-agent token reads secret/app via the leader" bash -c "curl -s --cacert '$CA' -H 'X-Vault-Token: $T' '$L/v1/secret/data/app' | grep -q '\"a\":\"1\"'"
    check "cluster: curl --cacert other-ca.pem fails verification" bash -c "curl -s -o /dev/null --cacert '$CL/other-ca.pem' '$L/v1/sys/health'; test \$? -eq 60"
    run_lab X seal "$CL"
    TIMES+=("seal (3 nodes): ${LAST_MS} ms")
    sealed_ok=1
    for n in 1 2 3; do
        [[ $(code --cacert "$CA" "${K[NODE${n}_ADDR]}/v1/sys/health") == 503 ]] || sealed_ok=0
        [[ $(code --cacert "$CA" -H "X-Vault-Token: $TOK" "${K[NODE${n}_ADDR]}/v1/secret/metadata/X") == 503 ]] || sealed_ok=0
    done
    check "cluster: seal; every node answers 503 to sys/health and secret/metadata/X" test "$sealed_ok" = 1
    declare -A U
    run_lab U unseal "$CL"
    TIMES+=("unseal (3 nodes): ${LAST_MS} ms")
    check "cluster: unseal; a leader again (${U[LEADER_ADDR]:-none})" test "$(code --cacert "$CA" "${U[LEADER_ADDR]:-http://127.0.0.1:1}/v1/sys/health")" = 200
    declare -A KL
    if run_lab KL kill-leader "$CL"; then
        TIMES+=("kill-leader: ${LAST_MS} ms in all, ELECTION_MS=${KL[ELECTION_MS]}")
        ok "kill-leader: killed ${KL[KILLED_ADDR]}, new leader ${KL[LEADER_ADDR]} after ${KL[ELECTION_MS]} ms"
        check "kill-leader: the killed server is gone" bash -c "! kill -0 ${KL[KILLED_PID]} 2>/dev/null || grep -q '^State:.*Z' /proc/${KL[KILLED_PID]}/status"
        check "kill-leader: the new leader is active" test "$(code --cacert "$CA" "${KL[LEADER_ADDR]}/v1/sys/health")" = 200
        for n in 1 2 3; do
            a=${K[NODE${n}_ADDR]}
            [[ $a == "${KL[KILLED_ADDR]}" ]] && continue
            check "kill-leader: surviving node $a returns secret/app" bash -c "curl -s --cacert '$CA' -H 'X-Vault-Token: $TOK' '$a/v1/secret/data/app' | grep -q '\"a\":\"1\"'"
        done
        t0=$(now_ms)
        "$LAB" kill-leader "$CL" >/dev/null 2>"$WORK/quorum.err"
        status=$?
        check "kill-leader refuses (exit $status, $(( $(now_ms) - t0 )) ms) to leave no quorum: $(cat "$WORK/quorum.err")" bash -c "test $status -eq 1 && grep -q quorum '$WORK/quorum.err'"
        declare -A RV
        run_lab RV revive "$CL"
        TIMES+=("revive (1 node): ${LAST_MS} ms")
        check "revive brings the killed node back (${RV[REVIVED]:-0})" test "${RV[REVIVED]:-0}" = 1
        check "revive: list-peers shows three voters again" bash -c "BAO_ADDR='${RV[LEADER_ADDR]}' BAO_TOKEN='$TOK' BAO_CACERT='$CA' '$BAO' operator raft list-peers | grep -c ' true\$' | grep -qx 3"
    else
        bad "kill-leader"
    fi
    pids=$(sed -n 's/^NODE[0-9]_PID=//p' "$CL/state.env" | tr '\n' ' ')
    run_lab X stop "$CL"
    check "cluster: stop kills all three (STOPPED=${X[STOPPED]:-?}) and removes DIR" bash -c "for p in $pids; do ! kill -0 \$p 2>/dev/null || grep -q '^State:.*Z' /proc/\$p/status || exit 1; done; test ! -e '$CL'"
else
    bad "cluster --tls starts"
fi

# ---------------------------------------------------------------- done
echo "# times"
for t in "${TIMES[@]}"; do echo "     $t"; done
left=$(pgrep -f "$WORK/" || true)
check "no server of this run is left" test -z "$left"
echo "$passed passed, $failed failed"
(( failed == 0 ))
