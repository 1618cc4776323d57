#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# An idle RC queue pair learns at once that its netdevice went (see
# rxe_rust_unplug.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_unplug.py" "$@"
