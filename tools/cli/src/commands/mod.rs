//! One function per command: read its flags, make its call, print the answer (`show`).

pub mod buyer_token;
pub mod controls;
pub mod create;
pub mod events;
pub mod history;
pub mod long_running;
pub mod payments;
pub mod status;
pub mod webhooks;
pub mod whoami;

use std::io::IsTerminal as _;
use std::time::Duration;

use serde_json::Value;

/// How results are printed: JSON (`--json`) or text.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// `--json`.
    pub json: bool,
}

/// An event's resource in the admin API.
fn event_path(id: &str) -> String {
    format!("/admin/events/{id}")
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// Prints `value` as JSON or as `human` renders it.
fn show(cli: Output, value: &Value, human: impl FnOnce(&Value) -> String) {
    if cli.json {
        println!("{value}");
    } else {
        println!("{}", human(value));
    }
}

/// Runs `f`, showing a spinner with the elapsed time on stderr when it is a terminal.
fn progress<T>(cli: Output, label: &str, f: impl FnOnce() -> T) -> T {
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

/// `90s`, `5m`, `1h`, `250ms`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("`{s}` is not a duration like 90s, 5m, 1h, 250ms"))?;
    let ms = match unit {
        "ms" => n,
        "" | "s" => n * 1000,
        "m" => n * 60_000,
        "h" => n * 3_600_000,
        _ => return Err(format!("`{unit}` is not a unit: use ms, s, m or h")),
    };
    Ok(Duration::from_millis(ms))
}

/// `RATE,BURST`, e.g. `1,5` or `0.5,10`.
pub fn parse_limit(s: &str) -> Result<(f64, u64), String> {
    let (rate, burst) = s.split_once(',').ok_or("give RATE,BURST, e.g. 1,5")?;
    let rate: f64 = rate
        .trim()
        .parse()
        .map_err(|_| format!("`{rate}` is not a rate"))?;
    let burst: u64 = burst
        .trim()
        .parse()
        .map_err(|_| format!("`{burst}` is not a whole number"))?;
    Ok((rate, burst))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_limits_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert!(parse_duration("5 weeks").is_err());
        assert!(parse_duration("m").is_err());
        assert_eq!(parse_limit("0.5, 10"), Ok((0.5, 10)));
        assert!(parse_limit("1").is_err());
    }
}
