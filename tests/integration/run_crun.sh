#!/usr/bin/env bash
# sandgate run --backend container --runtime crun: the suite of run_container.sh against crun
# (a generated OCI bundle whose network namespace is the prepared one).
. "$(dirname "$0")/../lib/run_common.sh"
command -v crun >/dev/null || skip "needs crun (Debian package crun)"
run_suite --backend container --runtime crun
run_userns --backend container --runtime crun
run_nosetid --backend container --runtime crun
run_kill_gateway --backend container --runtime crun
run_signals --backend container --runtime crun
run_stopped --backend container --runtime crun
