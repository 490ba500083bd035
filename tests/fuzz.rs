//! A short round of every fuzz target (`r8s_sim::fuzz`): mutated inputs from
//! real ones, through every parser r8s runs on bytes it does not control;
//! none may panic. `cargo bench --bench fuzz` runs 10 million of each.

use r8s_sim::fuzz::{Report, hammer, quiet, seeded};

/// Inputs per target here (the bench runs 10 million).
const INPUTS: u64 = 10_000;

#[tokio::test(flavor = "multi_thread")]
async fn should_never_panic_on_mutated_input_in_any_parser() {
    let (sim, targets) = seeded().await;
    assert_eq!(targets.len(), 16);
    // Panics are counted, not printed (the hook is this binary's alone).
    quiet();
    let reports: Vec<Report> = tokio::task::spawn_blocking(move || {
        targets
            .iter()
            .enumerate()
            .map(|(i, t)| hammer(t, INPUTS, i as u64 + 1))
            .collect()
    })
    .await
    .unwrap();
    let _ = std::panic::take_hook();
    for r in &reports {
        println!(
            "{}: {} inputs in {:?}, {} panics",
            r.name, r.inputs, r.elapsed, r.panics
        );
    }
    for r in reports {
        let (input, why) = r.first.unwrap_or_default();
        assert_eq!(
            r.panics,
            0,
            "{} panicked: {why} (on {:?})",
            r.name,
            String::from_utf8_lossy(&input)
        );
    }
    sim.stop().await;
}
