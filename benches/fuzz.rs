//! The fuzz targets of `r8s_sim::fuzz` (sim/src/fuzz.rs), 10 million inputs each.
//!
//! `cargo bench --bench fuzz` (results in BENCHMARKS.md). `FUZZ_INPUTS=N`
//! runs N inputs per target instead; `FUZZ_SEED=S` changes the mutations;
//! `FUZZ_ONLY=TEXT` runs the targets whose name contains TEXT.
//! Targets run side by side, one per core; a panic is counted and its first
//! input printed (as text and hex), and the run exits 1 if there was any.

use std::sync::Mutex;
use std::time::Instant;

use r8s_sim::fuzz::{Report, hammer, quiet, seeded};

fn main() {
    let inputs: u64 = std::env::var("FUZZ_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (sim, mut targets) = rt.block_on(seeded());
    if let Ok(only) = std::env::var("FUZZ_ONLY") {
        targets.retain(|t| t.name.contains(&only));
    }
    quiet();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "fuzz: {} targets × {inputs} inputs (seed {seed}), {cores} at a time",
        targets.len()
    );
    let start = Instant::now();
    let next = Mutex::new(0usize);
    let reports: Mutex<Vec<(usize, Report)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..cores.min(targets.len()) {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap();
                        *n += 1;
                        *n - 1
                    };
                    let Some(t) = targets.get(i) else { return };
                    let r = hammer(t, inputs, seed.wrapping_mul(31).wrapping_add(i as u64));
                    eprintln!(
                        "  {}: {} inputs in {:.1} s, {} panics",
                        r.name,
                        r.inputs,
                        r.elapsed.as_secs_f64(),
                        r.panics
                    );
                    reports.lock().unwrap().push((i, r));
                }
            });
        }
    });
    let mut reports = reports.into_inner().unwrap();
    reports.sort_by_key(|(i, _)| *i);
    println!("| target | inputs | time | inputs/s | panics |");
    println!("|---|---|---|---|---|");
    let mut panics = 0;
    for (_, r) in &reports {
        let secs = r.elapsed.as_secs_f64();
        println!(
            "| {} | {} | {:.1} s | {:.0} | {} |",
            r.name,
            r.inputs,
            secs,
            r.inputs as f64 / secs,
            r.panics
        );
        panics += r.panics;
        if let Some((input, why)) = &r.first {
            println!("  first panic: {why}");
            println!("  input: {:?}", String::from_utf8_lossy(input));
            println!(
                "  hex: {}",
                input.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
        }
    }
    println!(
        "total: {} inputs in {:.1} s, {panics} panics",
        reports.iter().map(|(_, r)| r.inputs).sum::<u64>(),
        start.elapsed().as_secs_f64()
    );
    rt.block_on(sim.stop());
    if panics > 0 {
        std::process::exit(1);
    }
}
