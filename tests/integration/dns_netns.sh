#!/usr/bin/env bash
# A sandbox (network namespace) whose DNS, UDP and TCP port 53 to whatever
# server it names, is redirected by nftables to the DNS responder, and
# whose TCP goes to the transparent listener (DESIGN.md "Adapters").
# Its resolv.conf names a made-up server (192.0.2.53): only the redirect
# can answer.
#  - getaddrinfo() of an allowed name resolves; of an unlisted name fails
#    at once (NXDOMAIN), and the upstream dnsmasq never hears of it;
#  - dig over TCP, and over IPv6, to made-up servers is answered too;
#  - what the sandbox learned names its IP-only connections in the audit
#    record ("dst_host_source":"dns") without widening anything: such a
#    connection is still denied without a CIDR rule.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/px_common.sh"
. "$(dirname "$0")/../lib/dns_common.sh"
need_root
need python3 jq nft ip dig dnsmasq

dnsmasq_start --local-ttl=300 \
	--address=/learn.example.test/198.51.100.20 \
	--address=/learn6.example.test/2001:db8::20
TP=$(freeport)
netns_make dnsn
cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { transparent: "[::]:$TP", dns: "[::]:0" }
  workers: 2
  resolver: { servers: ["127.0.0.1:$DP"] }
  limits: { handshake_timeout: 1s }
audit: { path: $T/audit.jsonl }
sandboxes:
  sbx-dns:
    sources: [$NS_NET4, $NS_NET6]
    allow:
      - { name: learn, domains: [learn.example.test, learn6.example.test] }
default: deny
YAML
sg_start "$T/sg.yaml"
DNS_PORT=$(sg_dns_port)

# The sandbox side of an adapter: DNS (tcp/53 before the catch-all TCP
# rule) to the responder, TCP to the transparent listener, nothing else.
TBL=${SGT_ID}_dns
NFT_TABLES+=("$TBL")
nft -f - <<NFT || fail "nft"
table inet $TBL {
	chain sbx_pre {
		type nat hook prerouting priority dstnat; policy accept;
		iifname "$HOST_IF" udp dport 53 redirect to :$DNS_PORT
		iifname "$HOST_IF" tcp dport 53 redirect to :$DNS_PORT
		iifname "$HOST_IF" meta l4proto tcp redirect to :$TP
	}
	chain sbx_fwd {
		type filter hook forward priority filter; policy accept;
		iifname "$HOST_IF" drop
	}
	chain sbx_input {
		type filter hook input priority filter; policy accept;
		iifname "$HOST_IF" tcp dport { $TP, $DNS_PORT } accept
		iifname "$HOST_IF" udp dport $DNS_PORT accept
		iifname "$HOST_IF" meta l4proto { icmp, ipv6-icmp } accept
		iifname "$HOST_IF" drop
	}
}
NFT
# `ip netns exec` bind-mounts /etc/netns/NS/resolv.conf over /etc/resolv.conf
mkdir -p "/etc/netns/$NS"
printf 'nameserver 192.0.2.53\noptions timeout:2 attempts:1\n' >"/etc/netns/$NS/resolv.conf"
trap 'rm -rf "/etc/netns/$NS"; rmdir /etc/netns 2>/dev/null; cleanup' EXIT

gai() {   # gai NAME: the addresses getaddrinfo() gives inside the sandbox, or the error
	ip netns exec "$NS" python3 -c '
import socket, sys
try:
    print(" ".join(sorted({a[4][0] for a in socket.getaddrinfo(sys.argv[1], 443, proto=socket.IPPROTO_TCP)})))
except socket.gaierror as e:
    print("error %d" % e.errno)' "$1"
}

t0=$(date +%s%N)
r=$(gai learn.example.test)
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "getaddrinfo(learn.example.test) in the sandbox: 198.51.100.20 (got '$r' in $ms ms)" \
	test "$r" = 198.51.100.20
check "audit: the query came from the sandbox's own address" audit_exists \
	'.event == "dns" and .sandbox == "sbx-dns" and .qname == "learn.example.test" and .qtype == "A"
	 and .decision == "allow" and (.src | startswith("'"$NS_V4"':"))'
t0=$(date +%s%N)
r=$(gai unlisted-in-ns.example.test)
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "getaddrinfo(unlisted-in-ns.example.test): fails as not found (EAI_NONAME -2) at once (got '$r' in $ms ms)" \
	bash -c "[ '$r' = 'error -2' ] && [ $ms -lt 1500 ]"
check "audit: NXDOMAIN default_deny for it" audit_exists \
	'.event == "dns" and .qname == "unlisted-in-ns.example.test" and .rcode == "NXDOMAIN" and .reason == "default_deny"'

r=$(ip netns exec "$NS" dig +time=3 +tries=1 +tcp @192.0.2.53 learn.example.test A +short)
check "dig +tcp to a made-up server from the sandbox: answered ($r)" test "$r" = 198.51.100.20
r=$(ip netns exec "$NS" dig +time=3 +tries=1 @2001:db8::53 learn6.example.test AAAA +short)
check "dig over IPv6 to a made-up server: answered ($r)" test "$r" = 2001:db8::20
check "audit: that one came over IPv6" audit_exists \
	'.event == "dns" and .qname == "learn6.example.test" and (.src | startswith("['"$NS_V6"']:"))'

# What the sandbox learned names the IP-only connection; the decision is
# still the address's alone (no CIDR rule: denied).
ip netns exec "$NS" python3 -c '
import socket, sys
for ip in sys.argv[1:]:
    s = socket.create_connection((ip, 443), timeout=5)
    s.sendall(b"PING\r\n")
    try:
        s.recv(100)
    except OSError:
        pass
    s.close()' 198.51.100.20 198.51.100.21
check "IP-only connection to a learned address: denied, named after the DNS answer" audit_exists \
	'.event == "connection" and .sandbox == "sbx-dns" and .decision == "deny" and .reason == "no_hostname"
	 and .dst_ip == "198.51.100.20" and .dst_host == "learn.example.test" and .dst_host_source == "dns"'
check "… to an address it never resolved: no name" audit_exists \
	'.event == "connection" and .decision == "deny" and .dst_ip == "198.51.100.21" and .dst_host == null
	 and (has("dst_host_source") | not)'
check "the upstream never heard of the unlisted name" upstream_never unlisted-in-ns
sg_stop
px_done
