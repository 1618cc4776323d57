#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Traffic between two RC QPs of one device, against both drivers: RNR,
# retry exhaustion, large RDMA WRITE/READ (see rxe_rust_traffic.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_traffic.py" "$@"
