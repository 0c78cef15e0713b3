# tests/netns_hosts.sh, sourced: two "hosts" on one machine for MPI over TCP. Each host is a
# Linux network namespace with only its loopback and one end of a veth pair (10.77.0.1 and
# 10.77.0.2, no default route), so whatever the ranks send each other crosses the veth and
# nothing leaves the pair. mpirun runs inside host a; for host b Open MPI's rsh launcher calls
# an agent script that enters b's namespace where ssh would log in. The namespaces carry this
# shell's pid, so runs side by side do not clash (the addresses live inside the namespaces).
# Needs root (CAP_SYS_ADMIN): where `ip netns add` is refused, netns_up says why.
#   netns_up DIR      make the hosts, the agent in DIR; 1 with the reason in NETNS_WHY
#   netns_mpirun ...  mpirun across the two hosts, one rank on each; the arguments follow it
#   netns_tx_bytes    bytes host a has sent over its veth end
#   netns_down        remove both namespaces: the caller traps EXIT with it before netns_up
NETNS_A=attn$$a NETNS_B=attn$$b
NETNS_IP_A=10.77.0.1 NETNS_IP_B=10.77.0.2 NETNS_NET=10.77.0.0/24
NETNS_AGENT= NETNS_WHY=

netns_down() {
  ip netns del $NETNS_A 2>/dev/null
  ip netns del $NETNS_B 2>/dev/null
  return 0
}

netns_up() {
  local dir=$1 err
  command -v ip >/dev/null || { NETNS_WHY="no ip command (Debian package iproute2)"; return 1; }
  command -v mpirun >/dev/null || { NETNS_WHY="no mpirun (Debian package openmpi-bin; make deps)"; return 1; }
  netns_down # left by a killed run whose pid this shell now has
  if ! err=$(ip netns add $NETNS_A 2>&1); then
    NETNS_WHY="ip netns add is not permitted here ($(echo "$err" | head -n 1))"
    return 1
  fi
  if ! err=$({ ip netns add $NETNS_B &&
    ip -n $NETNS_A link set lo up && ip -n $NETNS_B link set lo up &&
    ip -n $NETNS_A link add veth0 type veth peer name veth1 netns $NETNS_B &&
    ip -n $NETNS_A addr add $NETNS_IP_A/24 dev veth0 && ip -n $NETNS_B addr add $NETNS_IP_B/24 dev veth1 &&
    ip -n $NETNS_A link set veth0 up && ip -n $NETNS_B link set veth1 up; } 2>&1); then
    netns_down
    NETNS_WHY="cannot join two namespaces with a veth pair ($(echo "$err" | head -n 1))"
    return 1
  fi
  # Open MPI calls the agent as `agent HOST COMMAND...`, as it would call ssh.
  NETNS_AGENT=$(realpath "$dir")/netns_agent.sh
  cat >"$NETNS_AGENT" <<EOF
#!/bin/sh
host=\$1
shift
case \$host in
  $NETNS_IP_A) ns=$NETNS_A ;;
  $NETNS_IP_B) ns=$NETNS_B ;;
  *) echo "netns_agent: \$host: not one of the two hosts" >&2; exit 1 ;;
esac
exec ip netns exec \$ns sh -c "\$*"
EOF
  chmod +x "$NETNS_AGENT"
}

# TCP only (no shared memory between the "hosts"), daemons and ranks both on the veth subnet.
netns_mpirun() {
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ip netns exec $NETNS_A \
    mpirun --oversubscribe --host $NETNS_IP_A,$NETNS_IP_B -np 2 --bind-to none \
    --mca plm_rsh_agent "$NETNS_AGENT" --mca btl tcp,self \
    --mca btl_tcp_if_include $NETNS_NET --mca oob_tcp_if_include $NETNS_NET "$@"
}

netns_tx_bytes() { ip netns exec $NETNS_A cat /sys/class/net/veth0/statistics/tx_bytes; }
