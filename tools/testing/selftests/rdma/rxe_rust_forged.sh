#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Requests forged in sequence: what the responder checks beyond the PSN (see
# rxe_rust_forged.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_forged.py" "$@"
