#!/usr/bin/env bash
# mpi_netns.sh MPIRUN TEST...: MPI tests between two "machines" on one host
# (docs/distributed.md, "More than one machine"), run by CTest.
#
# Each rank runs in its own network namespace, made here: two namespaces
# joined by veth pairs to a bridge in the host's namespace, addresses in
# 10.199.<k>.0/24 (k picked free; loopback-only addressing, nothing routed
# out).  Open MPI then has no shared memory between the ranks
# (btl self,tcp) and its TCP path goes over the veth pairs, as between two
# machines; mpirun's PMIx server and daemon reach the ranks over the bridge.
# Everything made is removed on exit.  Where namespaces cannot be made (not
# root, no `ip`, a container without CAP_NET_ADMIN), the same tests run over
# TCP on loopback with shared memory disabled instead; the first line says
# which.  Each TEST runs with two ranks and must pass.
set -u
mpirun="$1"
shift
unset OMPI_MCA_btl OMPI_MCA_btl_vader_single_copy_mechanism
tag="e$$"
net=""
cleanup() {
    for n in 0 1; do
        ip netns del "${tag}n$n" 2>/dev/null
        ip link del "${tag}h$n" 2>/dev/null
    done
    ip link del "${tag}br" 2>/dev/null
}
make_namespaces() {
    command -v ip >/dev/null && [ "$(id -u)" = 0 ] || return 1
    local k
    for k in $(seq 199 254); do # a /24 no interface uses yet
        ip -4 addr show | grep -q "inet 10\.$k\." || { net="10.$k.0"; break; }
    done
    [ -n "$net" ] || return 1
    trap cleanup EXIT
    ip link add "${tag}br" type bridge || return 1
    ip addr add "$net.254/24" dev "${tag}br" && ip link set "${tag}br" up || return 1
    local n
    for n in 0 1; do
        ip netns add "${tag}n$n" &&
            ip link add "${tag}h$n" type veth peer name "${tag}v$n" &&
            ip link set "${tag}h$n" master "${tag}br" && ip link set "${tag}h$n" up &&
            ip link set "${tag}v$n" netns "${tag}n$n" &&
            ip netns exec "${tag}n$n" ip addr add "$net.$((n + 1))/24" dev "${tag}v$n" &&
            ip netns exec "${tag}n$n" ip link set "${tag}v$n" up &&
            ip netns exec "${tag}n$n" ip link set lo up || return 1
    done
}
failed=0
if make_namespaces; then
    echo "mpi_netns: two network namespaces joined by veth pairs ($net.0/24), TCP between the ranks"
    for t in "$@"; do
        PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include="${tag}br" \
            timeout -k 10 300 "$mpirun" --allow-run-as-root --oversubscribe --mca btl self,tcp \
            --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "${tag}br" \
            -np 1 ip netns exec "${tag}n0" "$t" : -np 1 ip netns exec "${tag}n1" "$t" || failed=1
    done
else
    cleanup
    echo "mpi_netns: no network namespaces here; TCP on loopback, shared memory disabled"
    for t in "$@"; do
        timeout -k 10 300 "$mpirun" --allow-run-as-root --oversubscribe --mca btl self,tcp \
            --mca btl_tcp_if_include lo -np 2 "$t" || failed=1
    done
fi
exit $failed
