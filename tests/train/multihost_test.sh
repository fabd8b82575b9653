#!/usr/bin/env bash
# Two "hosts" made of Linux network namespaces joined by a veth pair, with
# nothing shared but the file system: mpirun (in host 1) starts the remote
# daemon through a launcher script that enters host 2's namespace (in place
# of ssh), and the ranks talk TCP only (btl tcp,self: no shared memory). The
# 2-rank run must match one process with grad_accum = 2 bit for bit, and
# its traffic must have crossed the veth link.
# Skips (exit 77) where namespaces cannot be made (no root, no CAP_SYS_ADMIN).
# Usage: multihost_test.sh REPO ANVIL
set -uo pipefail
repo=$1 anvil=$2
work=$(mktemp -d)
ns1=anvil_h1_$$ ns2=anvil_h2_$$ va=anvh1$$ vb=anvh2$$
ip1=10.231.$(( $$ % 200 )).1 ip2=10.231.$(( $$ % 200 )).2
cleanup() {
  ip netns del "$ns1" 2>/dev/null
  ip netns del "$ns2" 2>/dev/null
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

if ! ip netns add "$ns1" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces here (needs root / CAP_SYS_ADMIN)"
  exit 77
fi
ip netns add "$ns2" || fail "second namespace"
ip link add "$va" type veth peer name "$vb" || fail "veth pair"
ip link set "$va" netns "$ns1" && ip link set "$vb" netns "$ns2" || fail "moving the veth ends"
ip -n "$ns1" addr add "$ip1/24" dev "$va" && ip -n "$ns2" addr add "$ip2/24" dev "$vb" || fail "addresses"
for ns in "$ns1" "$ns2"; do ip -n "$ns" link set lo up; done
ip -n "$ns1" link set "$va" up && ip -n "$ns2" link set "$vb" up || fail "links up"

# mpirun's remote start: "AGENT [options] HOST COMMAND..." runs COMMAND (a
# shell command line, as ssh would) inside HOST's namespace.
cat > "$work/enter_host.sh" <<AGENT
#!/usr/bin/env bash
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
case "\$host" in
  $ip1) ns=$ns1 ;;
  $ip2) ns=$ns2 ;;
  *) echo "enter_host.sh: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
chmod +x "$work/enter_host.sh"

source "$repo/tests/train/micro_run.sh"
micro_data
micro_toml 4 2 2
"$anvil" train --config "$work/micro.toml" --out "$work/one" --set train.precision=f32 \
  --set train.grad_accum=2 > "$work/one.log" 2>&1 || { cat "$work/one.log"; fail "one process"; }

tx_before=$(ip netns exec "$ns1" cat "/sys/class/net/$va/statistics/tx_bytes")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Under AddressSanitizer: MPI keeps allocations to exit (as in mpirun_test.sh).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
ip netns exec "$ns1" timeout 300 mpirun -np 2 --host "$ip1,$ip2" --bind-to none \
  --mca plm_rsh_agent "$work/enter_host.sh" \
  --mca btl tcp,self --mca btl_tcp_if_include "$ip1/24" --mca oob_tcp_if_include "$ip1/24" \
  "$anvil" train --config "$work/micro.toml" --out "$work/two_hosts" --set train.precision=f32 \
  > "$work/two_hosts.log" 2>&1 || { cat "$work/two_hosts.log"; fail "the 2-host run"; }
tx_after=$(ip netns exec "$ns1" cat "/sys/class/net/$va/statistics/tx_bytes")
sent=$(( tx_after - tx_before ))
# Each step all-reduces ~0.3 MB of gradients; 4 steps must move well over 0.5 MB.
(( sent > 500000 )) || fail "only $sent bytes crossed the veth link: the ranks did not talk over it"
/usr/bin/python3 "$repo/tests/train/compare_runs.py" "$work/one" "$work/two_hosts" || fail "2 hosts != 1 process"
echo "ok: 2 ranks on 2 network namespaces over TCP ($sent bytes on the link) == 1 process, bitwise"
