#!/usr/bin/env bash
# sandgate run --backend gvisor: the suite of run_container.sh against runsc
# (a generated OCI bundle whose network namespace is the prepared one).
. "$(dirname "$0")/../lib/run_common.sh"
command -v runsc >/dev/null || skip "needs runsc (Debian package runsc)"
run_suite --backend gvisor
run_nosetid --backend gvisor
run_kill_gateway --backend gvisor
run_signals --backend gvisor
run_stopped --backend gvisor
