#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# A queue pair and its completion queue destroyed while their packets wait in
# a slow qdisc (see rxe_rust_inflight.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_inflight.py" "$@"
