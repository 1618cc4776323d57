#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Memory region protection against both drivers: no write access to pages
# pinned read-only through rereg_user_mr, rereg to another PD, and memory
# windows bound by work requests (see
# rxe_rust_mr.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_mr.py" "$@"
