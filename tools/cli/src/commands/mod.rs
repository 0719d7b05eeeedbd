//! One function per command: read its flags, make its call, print the answer (`show`).

pub mod buyer_token;
pub mod controls;
pub mod create;
pub mod events;
pub mod history;
pub mod long_running;
pub mod payments;
pub mod status;
pub mod whoami;

use std::io::IsTerminal as _;
use std::time::Duration;

use serde_json::Value;

use crate::Cli;

/// An event's resource in the admin API.
fn event_path(id: &str) -> String {
    format!("/admin/events/{id}")
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// Prints `value` as JSON or as `human` renders it.
fn show(cli: &Cli, value: &Value, human: impl FnOnce(&Value) -> String) {
    if cli.json {
        println!("{value}");
    } else {
        println!("{}", human(value));
    }
}

/// Runs `f`, showing a spinner with the elapsed time on stderr when it is a terminal.
fn progress<T>(cli: &Cli, label: &str, f: impl FnOnce() -> T) -> T {
    if cli.json || !std::io::stderr().is_terminal() {
        return f();
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let start = std::time::Instant::now();
            let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            let mut i = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                eprint!(
                    "\r{} {label}… {:.1}s ",
                    frames[i % frames.len()],
                    start.elapsed().as_secs_f64()
                );
                i += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            eprint!("\r\x1b[2K");
        });
        let out = f();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        out
    })
}
