#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Hostile values in a QP's shared rings (see rxe_rust_hostile.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_hostile.py" "$@"
