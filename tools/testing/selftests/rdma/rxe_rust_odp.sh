#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# On-demand paging against both drivers: capabilities, pages never touched,
# invalidation by MADV_DONTNEED, ibv_advise_mr (see rxe_rust_odp.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_odp.py" "$@"
