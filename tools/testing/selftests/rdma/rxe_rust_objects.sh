#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# rdma_rxe_rust verbs objects through pyverbs: bad sizes, queue mmap rules,
# and a leak check (see rxe_rust_objects.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_objects.py" "$@"
