#!/usr/bin/env bash
# sandgate run --backend container --runtime runc: the suite of run_container.sh against runc
# (a generated OCI bundle whose network namespace is the prepared one).
. "$(dirname "$0")/../lib/run_common.sh"
command -v runc >/dev/null || skip "needs runc (Debian package runc)"
run_suite --backend container --runtime runc
run_userns --backend container --runtime runc
run_idmap_fallback --backend container --runtime runc
run_nosetid --backend container --runtime runc
run_kill_gateway --backend container --runtime runc
run_signals --backend container --runtime runc
run_stopped --backend container --runtime runc
