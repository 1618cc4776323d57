#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The driver's tracepoints on real traffic (see rxe_rust_trace.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_trace.py" "$@"
