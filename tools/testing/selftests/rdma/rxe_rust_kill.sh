#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Processes killed with SIGKILL in the middle of RDMA WRITEs, 25 rounds: no
# kernel report, the device still works (see rxe_rust_kill.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_kill.py" "$@"
