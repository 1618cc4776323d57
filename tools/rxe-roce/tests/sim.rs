// SPDX-License-Identifier: GPL-2.0

//! Deterministic simulation of the RC, UC and UD transport over a faulty link.
//!
//! Runs a fixed set of seeds (`SIM_SEEDS`, default 1000, from `SIM_SEED_START`,
//! default 0) through `rxe_roce::sim` and checks that the set covered every
//! opcode and fault kind. Each failing seed prints the command that
//! reproduces it. For more seeds: `cargo run --release --example sim -- --seeds N`.

use std::time::Instant;

use rxe_roce::roce::opcode::QpType;
use rxe_roce::roce::wqe::WrOpcode;
use rxe_roce::sim::{
    repro_command,
    run,
    Report,
    Scenario, //
};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn simulation_seeds() {
    let start = env("SIM_SEED_START", 0);
    let count = env("SIM_SEEDS", 5000);
    let t = Instant::now();
    let mut total = Report::default();
    let mut failures = Vec::new();
    let mut types = [0u64; 3];
    let mut error_runs = 0u64;
    for seed in start..start + count {
        let sc = Scenario::from_seed(seed);
        types[match sc.qp_type {
            QpType::Rc => 0,
            QpType::Uc => 1,
            QpType::Ud | QpType::Gsi => 2,
        }] += 1;
        match run(seed) {
            Ok(r) => {
                total.add(&r);
                error_runs += u64::from(r.error);
            }
            Err(e) => {
                eprintln!(
                    "seed {seed} failed: {e}\n  reproduce: {}",
                    repro_command(seed)
                );
                failures.push(seed);
            }
        }
    }
    eprintln!(
        "{count} seeds in {:.1} s: RC/UC/UD {types:?}; {} WQEs, opcodes {:?}; {} packets, \
         {} dropped, {} duplicated, {} corrupted, {} transmit buffers refused; {} duplicate and {} out-of-sequence \
         requests; {} retries, {} RNR retries; {} retry and {} RNR retry budgets exhausted \
         in {error_runs} error runs",
        t.elapsed().as_secs_f64(),
        total.wqes,
        total.opcodes,
        total.packets,
        total.dropped,
        total.duplicated,
        total.corrupted,
        total.tx_full,
        total.duplicate_requests,
        total.out_of_sequence,
        total.retries,
        total.rnr_retries,
        total.retry_exceeded,
        total.rnr_retry_exceeded,
    );
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
    if count >= 1000 {
        // The fixed set covers every opcode and every fault kind.
        for op in [
            WrOpcode::Send,
            WrOpcode::SendWithImm,
            WrOpcode::SendWithInv,
            WrOpcode::RdmaWrite,
            WrOpcode::RdmaWriteWithImm,
            WrOpcode::RdmaRead,
            WrOpcode::AtomicCmpAndSwp,
            WrOpcode::AtomicFetchAndAdd,
            WrOpcode::AtomicWrite,
            WrOpcode::Flush,
        ] {
            assert!(
                total.opcodes.get(&(op as u32)).copied().unwrap_or(0) > 100,
                "{op:?}"
            );
        }
        assert!(types.iter().all(|&n| n > 100));
        assert!(total.dropped > 0 && total.duplicated > 0 && total.corrupted > 0);
        assert!(total.tx_full > 0);
        assert!(total.duplicate_requests > 0 && total.out_of_sequence > 0);
        assert!(total.retries > 0 && total.rnr_retries > 0);
        assert!(total.retry_exceeded > 0 && total.rnr_retry_exceeded > 0);
    }
}

/// A clean link: every opcode succeeds with no retry at all.
#[test]
fn clean_link_needs_no_retry() {
    let mut checked = 0;
    for seed in 0..400 {
        let sc = Scenario::from_seed(seed);
        if sc.drop_ppm != 0 || sc.jitter_ns != 0 || sc.recv_delay_ns != 0 || sc.tx_full_ppm != 0 {
            continue;
        }
        let r = run(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(
            (r.retries, r.rnr_retries, r.error),
            (0, 0, false),
            "seed {seed}"
        );
        assert_eq!(r.dropped, 0);
        checked += 1;
    }
    assert!(checked > 20);
}

/// A link that never delivers: retries stop at the count, and all WQEs flush.
#[test]
fn dead_link_exhausts_retries() {
    for retry_cnt in 0..=7u8 {
        let mut sc = Scenario::from_seed(5);
        sc.qp_type = QpType::Rc;
        sc.ops_per_side = [6, 0];
        sc.drop_ppm = 1_000_000;
        sc.retry_cnt = retry_cnt;
        let r = rxe_roce::sim::run_scenario(&sc).unwrap_or_else(|e| panic!("{e}"));
        assert!(r.error);
        assert_eq!(r.retries, u64::from(retry_cnt));
        assert_eq!(r.retry_exceeded, 1);
    }
}

/// Pages not present (on-demand paging) on one memory access in a hundred (`SIM_ODP_PPM` per
/// million), over the fixed
/// seeds' links: every promise of the transport still holds, and a scenario that must
/// succeed on its link still succeeds (a page not present costs a retry as a loss does).
#[test]
fn page_faults_are_carried_out_again() {
    let start = env("SIM_ODP_SEED_START", 0);
    let count = env("SIM_ODP_SEEDS", 2000);
    let ppm = env("SIM_ODP_PPM", 10_000) as u32;
    let mut total = Report::default();
    let mut failures = Vec::new();
    for seed in start..start + count {
        let mut sc = Scenario::from_seed(seed);
        sc.odp_ppm = ppm;
        match rxe_roce::sim::run_scenario(&sc) {
            Ok(r) => total.add(&r),
            Err(e) => {
                eprintln!(
                    "seed {seed} failed with page faults: {e}\n  reproduce: \
                     SIM_ODP_SEED_START={seed} SIM_ODP_SEEDS=1 SIM_ODP_PPM={ppm} SIM_TRACE=1 \
                     cargo test --test sim page_faults"
                );
                failures.push(seed);
            }
        }
    }
    eprintln!(
        "{count} seeds with page faults: {} faults, {} retries, {} RNR retries",
        total.page_faults, total.retries, total.rnr_retries
    );
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
    if count >= 1000 && ppm >= 10_000 {
        assert!(total.page_faults > 1000);
    }
}
