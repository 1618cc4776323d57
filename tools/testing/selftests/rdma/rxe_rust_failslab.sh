#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Allocations that fail inside the driver: every verb's error paths, and
# traffic (see rxe_rust_failslab.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_failslab.py" "$@"
