// SPDX-License-Identifier: GPL-2.0
/*
 * The driver's tracepoints (include/trace/events/rxe_rust.h), with the
 * functions Rust calls them through (rust/kernel/rdma/trace.rs).
 */

#define CREATE_TRACE_POINTS
#define CREATE_RUST_TRACE_POINTS
#include <trace/events/rxe_rust.h>
