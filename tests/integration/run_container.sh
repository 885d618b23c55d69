#!/usr/bin/env bash
# sandgate run --backend container (namespaces made by sandgate itself):
# allowed HTTPS works from inside over IPv4 and IPv6 (curl and python),
# a denied domain fails, DNS is answered by the gateway or dropped, UDP and
# other host ports are unreachable, nothing appears on the host's real
# interface, killing the gateway leaves no egress, signals and a dead
# parent tear everything down, and CMD's exit status comes back. Root
# inside is an unprivileged host uid, and CMD's files in the (idmapped)
# workspace belong to its owner, a root-owned workspace included, but never
# with a setuid or setgid bit.
. "$(dirname "$0")/../lib/run_common.sh"
run_suite --backend container
run_userns --backend container
run_idmap_fallback --backend container
run_nosetid --backend container
run_kill_gateway --backend container
run_signals --backend container
run_stopped --backend container
run_unregistered --backend container
