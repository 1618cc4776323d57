#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Malformed and unwanted datagrams from the wire, dropped with a reason (see
# rxe_rust_drops.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_drops.py" "$@"
