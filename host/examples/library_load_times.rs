//! Prints how long loading a template library takes: compiled cold, from
//! wasmtime's disk cache, and from the runtime's in-process cache; then the
//! cost of a fresh instance and of one render.
//!
//! `cargo run --release -p haptic --example library_load_times [component.wasm]`
//! (defaults to the misbehaving test library).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use haptic::library::{LibraryRuntime, RuntimeConfig};

fn main() -> anyhow::Result<()> {
    let path = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(haptic::guests::MISBEHAVING_PATH));
    let bytes = std::fs::read(&path)?;
    let origin = path.display().to_string();
    let cache = tempfile::tempdir()?;
    let cached = |dir: &std::path::Path| {
        LibraryRuntime::new(RuntimeConfig {
            cache_dir: Some(dir.to_path_buf()),
            ..RuntimeConfig::default()
        })
    };

    let cold_runtime = LibraryRuntime::new(RuntimeConfig::default())?;
    let cold = time(|| cold_runtime.load_bytes_uncached(&origin, &bytes))?;

    // The first runtime fills the disk cache; a second one (as a new process
    // would) reads it.
    let filling = cached(cache.path())?;
    let fill = time(|| filling.load_bytes_uncached(&origin, &bytes))?;
    drop(filling);
    let reading = cached(cache.path())?;
    let from_disk = time(|| reading.load_bytes_uncached(&origin, &bytes))?;
    let stats = reading.disk_cache_stats();

    let (library, first) = timed(|| reading.load_bytes(&origin, &bytes))?;
    let in_process = time(|| reading.load_bytes(&origin, &bytes))?;

    let (mut instance, instantiate) = timed(|| library.instantiate())?;
    let values = serde_json::json!({});
    let configure = time(|| instance.configure(&values))?;
    let render = time(|| instance.render(Vec::new()))?;

    println!("{} ({} KiB)", path.display(), bytes.len() / 1024);
    println!("  load, compiled cold          {}", ms(cold));
    println!("  load, compiled to fill cache {}", ms(fill));
    println!(
        "  load, from disk cache        {}   (hits, misses: {stats:?})",
        ms(from_disk)
    );
    println!("  load, first in this runtime  {}", ms(first));
    println!("  load, from in-process cache  {}", ms(in_process));
    println!("  instantiate                  {}", ms(instantiate));
    println!("  configure                    {}", ms(configure));
    println!("  render (no objects)          {}", ms(render));
    Ok(())
}

fn timed<T, E>(f: impl FnOnce() -> Result<T, E>) -> Result<(T, Duration), E> {
    let started = Instant::now();
    let value = f()?;
    Ok((value, started.elapsed()))
}

fn time<T, E>(f: impl FnOnce() -> Result<T, E>) -> Result<Duration, E> {
    timed(f).map(|(_, elapsed)| elapsed)
}

fn ms(duration: Duration) -> String {
    format!("{:>9.3} ms", duration.as_secs_f64() * 1000.0)
}
