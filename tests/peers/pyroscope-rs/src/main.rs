//! A small app on the pyroscope crate (pprof-rs backend) for profcol's peer tests: CPU in named
//! functions, part of it under a span_id thread tag (tag_wrapper), uploaded to the server given
//! until the run time has passed; then the agent is stopped (the last report is sent).
//!
//!     pyroscope-peer URL APP TENANT SPAN_ID SECONDS
use pyroscope::backend::{pprof_backend, BackendConfig, PprofConfig};
use pyroscope::pyroscope::PyroscopeAgentBuilder;
use sha2::{Digest, Sha256};
use std::hint::black_box;
use std::time::{Duration, Instant};

#[inline(never)]
fn burn_sha(d: Duration) -> u8 {
    let end = Instant::now() + d;
    let mut h = [0u8; 32];
    while Instant::now() < end {
        for _ in 0..1000 {
            h = Sha256::digest(h).into();
        }
    }
    h[0]
}

#[inline(never)]
fn spin_loop(d: Duration) -> u64 {
    let end = Instant::now() + d;
    let mut x: u64 = 1;
    while Instant::now() < end {
        for i in 0..100_000u64 {
            x = black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }
    x
}

#[inline(never)]
fn traced_work(d: Duration) -> u8 {
    // not a tail call: the frame stays on the stack
    black_box(burn_sha(d)).wrapping_add(1)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (url, app, tenant, span) = (&args[1], &args[2], &args[3], &args[4]);
    let secs: f64 = args[5].parse()?;
    let agent = PyroscopeAgentBuilder::new(
        url,
        app,
        100,
        "pyroscope-rs",
        "2.1.5",
        pprof_backend(PprofConfig { sample_rate: 100 }, BackendConfig::default()),
    )
    .tags(vec![("env", "peer"), ("sdk", "rust")])
    .tenant_id(tenant.to_string())
    .upload_interval(Duration::from_secs(2))
    .build()?;
    let running = agent.start()?;
    let (add_tag, remove_tag) = running.tag_wrapper();
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut sink = 0u64;
    while Instant::now() < end {
        sink += burn_sha(Duration::from_millis(30)) as u64;
        sink += spin_loop(Duration::from_millis(20));
        add_tag("span_id".to_string(), span.to_string())?;
        sink += traced_work(Duration::from_millis(30)) as u64;
        remove_tag("span_id".to_string(), span.to_string())?;
    }
    black_box(sink);
    let ready = running.stop()?;
    ready.shutdown();
    Ok(())
}
