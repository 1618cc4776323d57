// SPDX-License-Identifier: GPL-2.0

//! What the benchmarks share: a timing loop.

use std::time::{
    Duration,
    Instant, //
};

/// Calls `f` `batch` times to warm up, then in batches of `batch` until `budget` has passed;
/// returns nanoseconds per call.
pub(crate) fn ns_per_call(budget: Duration, batch: u64, mut f: impl FnMut()) -> f64 {
    // Warm up caches and the branch predictor.
    for _ in 0..batch {
        f();
    }
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < budget {
        for _ in 0..batch {
            f();
        }
        calls += batch;
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}
