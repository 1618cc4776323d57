#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma-core's python suite (pyverbs) against rdma_rxe and rdma_rxe_rust in
# one run, reported side by side: every test the C driver passes must pass
# on rdma_rxe_rust too, unless rxe_rust_pyverbs.xfail lists it by name.
# The work is done by rxe_rust_pyverbs.py (see its help); this wrapper lets
# the kselftest runner find it with the other rxe_rust_*.sh tests.

exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_pyverbs.py" "$@"
