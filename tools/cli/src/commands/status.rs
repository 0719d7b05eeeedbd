//! `status`, once or `--watch`.

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Output;
use super::{event_path, show};
use crate::api::{Api, Failure};
use crate::render;

/// `status`: one read.
pub fn once(cli: Output, api: &Api, event: &str) -> Result<(), Failure> {
    let status = api.get(&event_path(event))?;
    show(cli, &status, |v| {
        render::status(event, v, None, api.server_now_ms().ok())
    });
    Ok(())
}

/// `status --watch`: one GET per interval; the screen is redrawn on a terminal, frames are
/// appended otherwise. A passing outage is shown and waited out; other failures end it.
pub fn watch(
    cli: Output,
    api: &Api,
    event: &str,
    interval: Duration,
    count: Option<u64>,
) -> Result<(), Failure> {
    let path = event_path(event);
    let tty = std::io::stdout().is_terminal();
    let mut previous: Option<(Instant, Value)> = None;
    let mut n = 0;
    loop {
        n += 1;
        match api.get(&path) {
            Ok(status) => {
                let now = Instant::now();
                if cli.json {
                    println!("{status}");
                } else {
                    // The previous frame turns the counts into per-second rates.
                    let rates = previous.as_ref().map(|(t, p)| (now.duration_since(*t), p));
                    let frame = render::status(event, &status, rates, api.server_now_ms().ok());
                    print_frame(&frame, tty, interval);
                }
                previous = Some((now, status));
            }
            Err(e) if e.exit_code() == 6 => {
                eprintln!("{e} (retrying)");
            }
            Err(e) => return Err(e),
        }
        if count.is_some_and(|c| n >= c) {
            return Ok(());
        }
        std::thread::sleep(interval);
    }
}

/// On a terminal, clears the screen first so the frame stays in place.
fn print_frame(frame: &str, tty: bool, interval: Duration) {
    if tty {
        print!("\x1b[H\x1b[2J{frame}\n\n(refreshing every {interval:?}; Ctrl-C stops)\n");
    } else {
        println!("{frame}\n");
    }
}
