#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Datagrams whose payload arrives in pages, received without being made
# linear (see rxe_rust_paged.py).
exec /usr/bin/python3 "$(dirname "$0")/rxe_rust_paged.py" "$@"
