#!/bin/sh
# Two hosts: two network namespaces joined by a veth pair, one rank in each, Open MPI over TCP
# between them (mpirun in the first namespace, a hostfile of both addresses, and a launch agent
# that runs `ip netns exec` instead of ssh); the DDP, ZeRO-1 and full-sharding equivalence tests
# (test_dist_ddp) must pass across them. The namespaces and their private addresses are made
# here and removed at the end. Needs root and iproute2; reports SKIPPED (exit 77) without them.
# Usage: dist_netns_test.sh TEST_BINARY MPIEXEC
set -eu
bin="$1"
mpi="$2"
[ "$(id -u)" -eq 0 ] || { echo "SKIPPED: making network namespaces needs root"; exit 77; }
command -v ip >/dev/null && command -v unshare >/dev/null || { echo "SKIPPED: needs ip (iproute2) and unshare"; exit 77; }
a="nbA$$"; b="nbB$$"; net="10.$(( $$ % 200 + 20 )).77"
work="$(mktemp -d)"
cleanup() { ip netns del "$a" 2>/dev/null || true; ip netns del "$b" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
if ! ip netns add "$a" 2>/dev/null; then echo "SKIPPED: cannot make network namespaces here"; exit 77; fi
ip netns add "$b"
ip link add "v$a" type veth peer name "v$b"
ip link set "v$a" netns "$a"
ip link set "v$b" netns "$b"
ip -n "$a" addr add "$net.1/24" dev "v$a"
ip -n "$b" addr add "$net.2/24" dev "v$b"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "v$a" up
ip -n "$b" link set "v$b" up
# each "host" gets its own host name as well, so Open MPI sees two nodes
cat > "$work/agent.sh" <<AGENT
#!/bin/sh
host="\$1"; shift
case "\$host" in
  $net.1) ns=$a ;;
  $net.2) ns=$b ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$ns; \$*"
AGENT
chmod +x "$work/agent.sh"
printf '%s slots=1\n%s slots=1\n' "$net.1" "$net.2" > "$work/hosts"
fwd=""
for v in NABLA_NUM_THREADS NABLA_DIST_TIMEOUT ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS; do
  eval "set=\${$v+x}"; [ -z "$set" ] || fwd="$fwd -x $v"
done
cd "$work"
# rank 0 in the first namespace, rank 1 in the second; TCP on the veth subnet only
set +e
ip netns exec "$a" unshare --uts sh -c "hostname $a; OMPI_MCA_btl= OMPI_MCA_pml= \"$mpi\" --allow-run-as-root \
  --hostfile hosts -n 2 --mca plm_rsh_agent $work/agent.sh --mca btl tcp,self --mca btl_tcp_if_include $net.0/24 \
  --mca oob_tcp_if_include $net.0/24 $fwd sh -c 'echo rank \$OMPI_COMM_WORLD_RANK on \$(hostname); exec \"$bin\"'" > out.txt 2>&1
rc=$?
set -e
cat out.txt
[ "$rc" -eq 0 ] || { echo "FAIL: the two-host run exited $rc"; exit 1; }
grep -q "rank 0 on $a" out.txt && grep -q "rank 1 on $b" out.txt || { echo "FAIL: the ranks did not run one in each namespace"; exit 1; }
[ "$(grep -c 'PASSED' out.txt)" -ge 2 ] || { echo "FAIL: the tests did not pass on both ranks"; exit 1; }
echo "dist_netns_test: all passed"
