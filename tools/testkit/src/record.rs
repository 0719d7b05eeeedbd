//! The API exchange recorder: every response the suite sees is later checked against
//! `api/openapi.yaml` by `scripts/check-openapi.py`.

use std::path::Path;

/// One request and its response, as `scripts/check-openapi.py` validates them against
/// `api/openapi.yaml`.
#[derive(serde::Serialize)]
pub(crate) struct Exchange<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub request: Option<&'a serde_json::Value>,
    pub status: u16,
    pub content_type: Option<&'a str>,
    /// The response's `Allow` header (a 405's required header).
    pub allow: Option<&'a str>,
    pub response: &'a str,
}

/// Appends an exchange to `$SECKILL_API_RECORD/<pid>.jsonl` when that variable is set (the
/// test command sets it). One file per test process, one line per exchange.
pub(crate) fn record_exchange(exchange: &Exchange) {
    use std::io::Write;
    let Some(dir) = std::env::var_os("SECKILL_API_RECORD") else {
        return;
    };
    let path = Path::new(&dir).join(format!("{}.jsonl", std::process::id()));
    let mut line = serde_json::to_string(exchange).expect("an exchange serializes");
    line.push('\n');
    // One line, one write, one writer at a time: a test's concurrent clients never interleave
    // their lines, however long (a provider event is up to 256 KiB).
    static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _writing = WRITING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        f.write_all(line.as_bytes())
    });
    if let Err(e) = written {
        panic!("recording an API exchange in {}: {e}", path.display());
    }
}
