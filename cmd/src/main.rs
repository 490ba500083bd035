//! The `r8s` binary: parse, configure, log, run. Everything else is in the
//! library (`r8s`) and, for `r8s sim` and `r8s demo` (the default feature
//! `sim`), the built-in upstream (`r8s-sim`).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use r8s::cli::ServeArgs;
use r8s::{Listeners, config, shutdown};
#[cfg(feature = "sim")]
use r8s_sim::cli::{DemoArgs, SimArgs};

/// r8s: a watch cache for the Kubernetes API.
///
/// r8s sits in front of kube-apiserver(s), list-watches the resources it is
/// told to cache, serves get/list/watch from memory and passes everything else
/// through unchanged. Settings come from built-in defaults, then the TOML file
/// given with --config, then R8S_* environment variables (R8S_LISTEN,
/// R8S_UPSTREAM__SERVERS='["https://a:6443"]', ...), then flags.
#[derive(Debug, Parser)]
#[command(
    name = "r8s",
    version = r8s::VERSION,
    propagate_version = true
)]
struct Cli {
    /// What to run.
    #[command(subcommand)]
    command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the r8s daemon in front of an upstream kube-apiserver.
    Serve(ServeArgs),
    /// Run the built-in upstream alone: an in-memory kube-apiserver stand-in for tests and benchmarks.
    #[cfg(feature = "sim")]
    Sim(SimArgs),
    /// Run the built-in upstream with sample objects and r8s in front of it, and print what to try.
    #[cfg(feature = "sim")]
    Demo(DemoArgs),
    /// Inspect the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
}

/// `r8s config ...`.
#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate the configuration and print the effective result (secrets redacted).
    Check(ServeArgs),
}

/// Exit code for bad usage or configuration (as clap uses for bad flags).
const EXIT_CONFIG: u8 = 2;

fn init_logging(level: &str, format: config::LogFormat) {
    r8s::logging::init(level, format);
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    for line in msg.to_string().lines() {
        eprintln!("r8s: {line}");
    }
    ExitCode::from(code)
}

/// Where glibc's malloc keeps a heap's free top instead of giving it back.
///
/// Until a large mmapped block is freed, glibc returns the free top of a heap
/// to the kernel as soon as it passes 128 KiB. A list in flight holds a few
/// hundred KiB of chunks and TLS records, freed as they are written, so each
/// list trimmed the heap and faulted the same pages in again: up to 2,500
/// page faults and half the CPU of a 11.6 MB protobuf list over TLS
/// (BENCHMARKS.md, "The heap's free top kept"). 4 MiB is well inside the range
/// glibc's own dynamic thresholds reach (up to 32 MiB); an operator's
/// `GLIBC_TUNABLES` for either setting wins (and then r8s leaves malloc alone).
///
/// And every [`TRIM_EVERY`], the free pages inside the heaps go back to the
/// kernel (`malloc_trim`): objects superseded under churn die in the order
/// they arrived, spread among live ones, and glibc gives back only a heap's
/// top by itself; the watch log's memory otherwise stays resident as holes
/// after it has turned over (BENCHMARKS.md, "(c) An upstream event's cost").
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_malloc() {
    const THRESHOLD: libc::c_int = 4 << 20;
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if tunables.contains("malloc.trim_threshold") || tunables.contains("malloc.mmap_threshold") {
        return;
    }
    // SAFETY: mallopt only changes the allocator's parameters (it takes the
    // arena locks itself); this runs before any other thread is started.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, THRESHOLD);
    }
    let trimmer = std::thread::Builder::new()
        .name("r8s-heap-trim".into())
        .spawn(|| {
            loop {
                std::thread::sleep(TRIM_EVERY);
                // SAFETY: malloc_trim takes each arena's lock while it walks
                // it (a few ms at most for a cache of 100 MiB).
                unsafe { libc::malloc_trim(0) };
            }
        });
    if let Err(e) = trimmer {
        eprintln!("r8s: not trimming the heap: cannot start its thread: {e}");
    }
}

/// How often [`tune_malloc`]'s thread gives the heaps' free pages back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_malloc() {}

fn main() -> ExitCode {
    tune_malloc();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(1, format!("cannot start the runtime: {e}")),
    };
    rt.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve(args).await,
            Command::Config(ConfigCommand::Check(args)) => {
                match config::load_checked(
                    args.config.as_deref(),
                    &args.overrides(),
                    &r8s::check_config,
                ) {
                    Ok(c) => {
                        print!("{}", c.to_redacted_toml());
                        ExitCode::SUCCESS
                    }
                    Err(e) => fail(EXIT_CONFIG, e),
                }
            }
            #[cfg(feature = "sim")]
            Command::Sim(args) => run_sim(args).await,
            #[cfg(feature = "sim")]
            Command::Demo(args) => {
                init_logging("info", config::LogFormat::Text);
                match r8s_sim::demo::run(args).await {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => fail(EXIT_CONFIG, e),
                }
            }
        }
    })
}

async fn serve(args: ServeArgs) -> ExitCode {
    let config = match config::load_checked(
        args.config.as_deref(),
        &args.overrides(),
        &r8s::check_config,
    ) {
        Ok(c) => c,
        Err(e) => return fail(EXIT_CONFIG, e),
    };
    init_logging(&config.log.level, config.log.format);
    let (listen, admin_listen) = (config.listen, config.admin_listen);
    let prepared = match r8s::prepare(config).await {
        Ok(p) => p,
        Err(e) => return fail(EXIT_CONFIG, e),
    };
    let api = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            return fail(
                EXIT_CONFIG,
                format!("cannot listen on {listen} (listen): {e}"),
            );
        }
    };
    let admin = match tokio::net::TcpListener::bind(admin_listen).await {
        Ok(l) => l,
        Err(e) => {
            return fail(
                EXIT_CONFIG,
                format!("cannot listen on {admin_listen} (admin_listen): {e}"),
            );
        }
    };
    let (trigger, signal) = shutdown::channel();
    tokio::spawn(async move {
        shutdown::os_signal().await;
        trigger.fire();
    });
    prepared.run(Listeners { api, admin }, signal).await;
    ExitCode::SUCCESS
}

#[cfg(feature = "sim")]
async fn run_sim(args: SimArgs) -> ExitCode {
    init_logging("info", config::LogFormat::Text);
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            return fail(
                EXIT_CONFIG,
                format!("cannot listen on {} (--listen): {e}", args.listen),
            );
        }
    };
    let handle = match r8s_sim::start(args.config(), listener).await {
        Ok(h) => h,
        Err(e) => return fail(EXIT_CONFIG, format!("cannot start the sim: {e}")),
    };
    tracing::info!(url = %handle.url(), "r8s sim serving");
    shutdown::os_signal().await;
    handle.stop().await;
    ExitCode::SUCCESS
}
