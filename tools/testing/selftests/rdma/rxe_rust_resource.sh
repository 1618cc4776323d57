#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# `rdma resource show` lists our objects with the C driver's details (see
# rxe_rust_resource.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_resource.py" "$@"
