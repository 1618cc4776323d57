// SPDX-License-Identifier: GPL-2.0

//! Runs the deterministic transport simulation over as many seeds as asked.
//!
//!     cargo run --release --example sim -- --seeds 100000 [--start 0]
//!     cargo run --release --example sim -- --seed 1234 --verbose
//!
//! Every failing seed is printed with the command that reproduces it; the
//! exit status is non-zero if any failed.

use std::process::ExitCode;
use std::time::Instant;

use rxe_roce::sim::{
    repro_command,
    run,
    Report,
    Scenario, //
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut start = 0u64;
    let mut count = 10_000u64;
    let mut verbose = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = || it.next().and_then(|v| v.parse::<u64>().ok());
        match a.as_str() {
            "--seed" => {
                start = num().expect("--seed N");
                count = 1;
            }
            "--start" => start = num().expect("--start N"),
            "--seeds" => count = num().expect("--seeds N"),
            "--verbose" | "-v" => verbose = true,
            _ => {
                eprintln!("usage: sim [--seeds N] [--start S] [--seed S] [--verbose]");
                return ExitCode::from(2);
            }
        }
    }
    let t = Instant::now();
    let mut total = Report::default();
    let mut failed = 0u64;
    for seed in start..start.saturating_add(count) {
        if verbose {
            println!("{:#?}", Scenario::from_seed(seed));
        }
        match run(seed) {
            Ok(r) => {
                if verbose {
                    println!("{r:#?}");
                }
                total.add(&r);
            }
            Err(e) => {
                failed += 1;
                println!(
                    "seed {seed} FAILED: {e}\n  reproduce: {}",
                    repro_command(seed)
                );
            }
        }
    }
    println!(
        "{count} seeds from {start} in {:.1} s: {failed} failed; {} WQEs, {} packets \
         ({} dropped, {} duplicated, {} corrupted, {} refused buffers), {} retries, {} RNR retries, \
         {} retry and {} RNR retry budgets exhausted",
        t.elapsed().as_secs_f64(),
        total.wqes,
        total.packets,
        total.dropped,
        total.duplicated,
        total.corrupted,
        total.tx_full,
        total.retries,
        total.rnr_retries,
        total.retry_exceeded,
        total.rnr_retry_exceeded,
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
