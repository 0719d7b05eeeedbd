//! The host as a production runtime: the `seckill-host up` binary as a child process (signals,
//! exit status, flags, log lines), over raw TCP where a client must misbehave. Graceful shutdown,
//! header/body/idle timeouts and the connection cap, the 413's lingering close, metrics, JSON
//! logs. Runs `target/release/seckill-host`: `cargo build --release -p seckill-host` first
//! (scripts/test.sh's run builds it with the tests).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use seckill_testkit::host_process::{HostProcess, get};
use seckill_testkit::{PgServer, RedisServer, free_port};

/// The conformance app (`/hello`, `/conformance/...`, a cron trigger every second) on the host
/// binary, with `args`.
fn host(redis: &RedisServer, pg: &PgServer, args: &[&str]) -> Result<HostProcess> {
    HostProcess::start(
        "tests/manifests/conformance.toml",
        &[("redis_host", redis.host()), ("pg_host", pg.host())],
        args,
    )
}

fn connect(addr: SocketAddr) -> Result<TcpStream> {
    let stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(15)))?;
    Ok(stream)
}

/// A connection to `addr` from the loopback address `from`: a peer of its own, apart from the
/// connections the test kit's readiness probe opened from 127.0.0.1 (the host may not have
/// seen those close yet).
fn connect_from(from: std::net::IpAddr, addr: SocketAddr) -> Result<TcpStream> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(from, 0))?;
        socket.connect(addr).await?.into_std()
    })?;
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(15)))?;
    Ok(stream)
}

/// A response, read to the end of its `Content-Length` body.
struct Response {
    head: String,
    body: String,
}

impl Response {
    fn status(&self) -> u16 {
        self.head[9..12].parse().expect("a status code")
    }
}

/// Reads up to and including the next CRLF.
fn read_line(stream: &mut TcpStream) -> Result<String> {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n") {
        if stream.read(&mut byte)? == 0 {
            bail!(
                "connection closed mid-line: {:?}",
                String::from_utf8_lossy(&bytes)
            );
        }
        bytes.push(byte[0]);
    }
    Ok(String::from_utf8(bytes)?)
}

/// One response, its body read by `Content-Length` or chunk by chunk.
fn read_response(stream: &mut TcpStream) -> Result<Response> {
    let mut head = String::new();
    while !head.ends_with("\r\n\r\n") {
        head += &read_line(stream)?;
    }
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (n, value) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|te| te.eq_ignore_ascii_case("chunked")) {
        loop {
            let size = usize::from_str_radix(read_line(stream)?.trim_end(), 16)?;
            let mut chunk = vec![0; size + 2];
            stream.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk[..size]);
            if size == 0 {
                break;
            }
        }
    } else {
        let length = header("content-length").map_or(Ok(0), |l| l.parse())?;
        body.resize(length, 0);
        stream.read_exact(&mut body)?;
    }
    Ok(Response {
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Whether the peer has closed `stream`, waiting up to `wait` for it.
fn closed_within(stream: &mut TcpStream, wait: Duration) -> Result<bool> {
    stream.set_read_timeout(Some(wait))?;
    let mut scratch = [0u8; 1024];
    match stream.read(&mut scratch) {
        Ok(0) => Ok(true),
        Ok(n) => bail!(
            "unexpected bytes: {:?}",
            String::from_utf8_lossy(&scratch[..n])
        ),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(false),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => Ok(true),
        Err(e) => Err(e.into()),
    }
}

/// SIGTERM: the listening socket closes at once (a new connection is refused), a request whose
/// body is still arriving and a guest still running both get their normal responses, an idle
/// keep-alive connection is closed, and the process exits 0.
#[test]
fn sigterm_finishes_requests_in_flight_then_exits_0() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let mut host = host(&redis, &pg, &["--shutdown-grace", "20s"])?;
    let addr = host.addr;

    let mut idle = connect(addr)?;
    write!(idle, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")?;
    assert_eq!(read_response(&mut idle)?.status(), 200);

    // Half a body sent: the guest is reading it.
    let mut uploading = connect(addr)?;
    write!(
        uploading,
        "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello"
    )?;
    // A guest that takes 700 ms.
    let mut slow = connect(addr)?;
    write!(
        slow,
        "GET /conformance/slow-incr HTTP/1.1\r\nHost: x\r\n\r\n"
    )?;
    std::thread::sleep(Duration::from_millis(200));

    host.signal("TERM")?;
    let start = Instant::now();
    loop {
        match TcpStream::connect(addr) {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => break,
            _ if start.elapsed() > Duration::from_secs(2) => bail!("still accepting after SIGTERM"),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    assert!(
        closed_within(&mut idle, Duration::from_secs(2))?,
        "an idle keep-alive connection is closed on shutdown"
    );
    drop(idle);

    let resp = read_response(&mut slow)?;
    assert_eq!(resp.status(), 200, "{}{}", resp.head, resp.body);
    assert!(resp.body.contains("done"), "{}", resp.body);
    drop(slow);

    std::thread::sleep(Duration::from_millis(300));
    uploading.write_all(b"world")?;
    let resp = read_response(&mut uploading)?;
    assert_eq!(resp.status(), 200, "{}{}", resp.head, resp.body);
    assert_eq!(resp.body, "hello");
    assert!(
        resp.head.to_ascii_lowercase().contains("connection: close"),
        "{}",
        resp.head
    );
    drop(uploading);

    let status = host.wait_exit(Duration::from_secs(10))?;
    assert!(status.success(), "{status}");
    let log = host.log().join("\n");
    assert!(log.contains("SIGTERM: shutting down"), "{log}");
    assert!(log.contains("shut down cleanly"), "{log}");
    Ok(())
}

/// A request that never completes holds the exit only for `--shutdown-grace`; SIGINT works as
/// SIGTERM does.
#[test]
fn the_shutdown_grace_bounds_the_wait() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let mut host = host(&redis, &pg, &["--shutdown-grace", "1s"])?;
    let mut stuck = connect(host.addr)?;
    write!(
        stuck,
        "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhel"
    )?;
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    host.signal("INT")?;
    let status = host.wait_exit(Duration::from_secs(10))?;
    let took = start.elapsed();
    assert!(status.success(), "{status}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "{took:?}"
    );
    let log = host.log().join("\n");
    assert!(log.contains("SIGINT: shutting down"), "{log}");
    assert!(log.contains("grace period over"), "{log}");
    Ok(())
}

/// Slowloris: more connections than the cap, each sending its head a byte at a time, are each
/// closed at the header timeout, and a normal client is served meanwhile (within about one
/// header timeout, when the first slow ones are cut off and its connection is accepted).
#[test]
fn slow_heads_are_cut_off_and_do_not_starve_other_clients() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let host = host(
        &redis,
        &pg,
        &["--header-timeout", "1s", "--max-connections", "48"],
    )?;
    let addr = host.addr;
    let start = Instant::now();
    let slow: Vec<_> = (0..64)
        .map(|_| {
            std::thread::spawn(move || -> Result<Duration> {
                let mut stream = TcpStream::connect(addr)?;
                let opened = Instant::now();
                stream.set_read_timeout(Some(Duration::from_millis(100)))?;
                let head = b"GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
                let mut scratch = [0u8; 256];
                for byte in head.iter().cycle() {
                    if opened.elapsed() > Duration::from_secs(8) {
                        bail!("never closed");
                    }
                    if stream.write_all(&[*byte]).is_err() {
                        return Ok(opened.elapsed());
                    }
                    match stream.read(&mut scratch) {
                        Ok(0) => return Ok(opened.elapsed()),
                        Ok(_) => bail!("a response to an unfinished head"),
                        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                        Err(_) => return Ok(opened.elapsed()),
                    }
                }
                unreachable!("cycle never ends")
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let response = get(addr, "/hello")?;
    let served = start.elapsed();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(served < Duration::from_secs(3), "served after {served:?}");
    for thread in slow {
        let lasted = thread.join().expect("no panic")?;
        // From the client's connect: a connection beyond the cap waits ~1 s to be accepted.
        assert!(
            lasted >= Duration::from_millis(900) && lasted < Duration::from_secs(4),
            "a slow connection lasted {lasted:?}"
        );
    }
    Ok(())
}

/// The idle timeout is the keep-alive's own, not the header timeout: a connection idle longer
/// than the header timeout still serves its next request, then closes after the idle timeout.
#[test]
fn idle_keep_alive_has_its_own_timeout() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let host = host(
        &redis,
        &pg,
        &["--header-timeout", "1s", "--idle-timeout", "3s"],
    )?;
    let mut stream = connect(host.addr)?;
    write!(stream, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")?;
    assert_eq!(read_response(&mut stream)?.status(), 200);
    assert!(!closed_within(&mut stream, Duration::from_secs(2))?);
    write!(stream, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")?;
    assert_eq!(read_response(&mut stream)?.status(), 200);
    let idle = Instant::now();
    assert!(closed_within(&mut stream, Duration::from_secs(6))?);
    let lasted = idle.elapsed();
    assert!(
        lasted >= Duration::from_millis(2500) && lasted < Duration::from_secs(5),
        "{lasted:?}"
    );
    Ok(())
}

/// A body still trickling in at the body timeout is answered `408` in the host's own words (a
/// byte every 100 ms: the deadline is the whole body's, not a pause's), and the connection
/// closes.
#[test]
fn a_body_not_whole_by_the_body_timeout_gets_408() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let host = host(&redis, &pg, &["--body-timeout", "1s"])?;
    let mut stream = connect(host.addr)?;
    write!(
        stream,
        "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab"
    )?;
    let start = Instant::now();
    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut received = Vec::new();
    let mut scratch = [0u8; 1024];
    loop {
        assert!(start.elapsed() < Duration::from_secs(6), "no end");
        let _ = stream.write_all(b"c");
        match stream.read(&mut scratch) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&scratch[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let took = start.elapsed();
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 408"), "{text:?}");
    assert!(text.contains("text/plain"), "the host's words: {text:?}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "{took:?}"
    );
    Ok(())
}

/// Slow bodies cannot starve the sale: every connection the host takes but one drip-feeds a
/// 16 KiB body, a byte at a time, many more of them than there are instances. The host reads a
/// body before its request waits for an instance, so none of them holds one: the one connection
/// left is a buyer served (not shed), and the cron trigger keeps running on its own slots, while
/// every slow body is still arriving unanswered.
#[test]
fn slow_bodies_hold_no_instance_while_a_buyer_and_the_cron_are_served() -> Result<()> {
    const CONNECTIONS: usize = 48;
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
    let host = host(
        &redis,
        &pg,
        &[
            "--max-connections",
            &CONNECTIONS.to_string(),
            "--max-instances",
            "2",
            "--queue-interval",
            "100ms",
            "--body-timeout",
            "120s",
            "--metrics-listen",
            &metrics.to_string(),
        ],
    )?;
    let scrape = |series: &str| -> Result<f64> {
        let scrape = get(metrics, "/metrics")?;
        Ok(scrape
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0))
    };
    let mut slow = Vec::new();
    for _ in 1..CONNECTIONS {
        let mut stream = connect(host.addr)?;
        write!(
            stream,
            "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 16384\r\n\r\n{{"
        )?;
        slow.push(stream);
    }
    let readers = slow
        .iter()
        .map(TcpStream::try_clone)
        .collect::<std::io::Result<Vec<_>>>()?;
    let dripping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let dripper = std::thread::spawn({
        let dripping = dripping.clone();
        move || {
            while dripping.load(std::sync::atomic::Ordering::Relaxed) {
                for stream in &mut slow {
                    let _ = stream.write_all(b" ");
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    });
    // Every slow connection is open at the host, its head read.
    let waited = Instant::now();
    while scrape("seckill_http_connections")? < (CONNECTIONS - 1) as f64 {
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "slow connections not open"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        scrape("seckill_instances_in_use")?,
        0.0,
        "a slow body holds an instance"
    );
    let cron_runs = r#"seckill_cron_runs_total{component="cron-probe",outcome="ok"}"#;
    let runs_before = scrape(cron_runs)?;

    let buyer = get(host.addr, "/hello")?;
    assert!(buyer.starts_with("HTTP/1.1 200"), "{buyer}");
    // The cron trigger fires every second, on slots of its own.
    let waited = Instant::now();
    while scrape(cron_runs)? <= runs_before {
        assert!(waited.elapsed() < Duration::from_secs(30), "no cron run");
        std::thread::sleep(Duration::from_millis(100));
    }
    for mut stream in readers {
        stream.set_nonblocking(true)?;
        let mut scratch = [0u8; 256];
        match stream.read(&mut scratch) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => bail!("a slow body was answered or closed: {other:?}"),
        }
    }
    assert_eq!(scrape("seckill_instances_in_use")?, 0.0);
    dripping.store(false, std::sync::atomic::Ordering::Relaxed);
    dripper.join().expect("no panic");
    Ok(())
}

/// A client still sending a body over the limit reads the 413 (the host reads and discards the
/// rest before closing) instead of losing it to EPIPE or ECONNRESET.
#[test]
fn a_413_reaches_a_client_still_sending_its_body() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let host = host(&redis, &pg, &["--max-request-body", "65536"])?;
    let chunk = vec![b'x'; 64 << 10];
    for attempt in 0..5 {
        let mut stream = connect(host.addr)?;
        write!(
            stream,
            "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
            64 * chunk.len()
        )?;
        for _ in 0..64 {
            stream
                .write_all(&chunk)
                .with_context(|| format!("attempt {attempt}: sending the body"))?;
            std::thread::sleep(Duration::from_millis(1));
        }
        let resp = read_response(&mut stream).with_context(|| format!("attempt {attempt}"))?;
        assert_eq!(resp.status(), 413, "{}", resp.head);
        assert!(resp.body.contains("65536 bytes"), "{}", resp.body);
    }
    Ok(())
}

/// `--metrics-listen`: requests by manifest route (not path) and status, latency by route, the
/// instance pool, Redis and Postgres connections, cron runs by component and outcome.
#[test]
fn metrics_count_by_route_status_and_component() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
    let host = host(&redis, &pg, &["--metrics-listen", &metrics.to_string()])?;
    for _ in 0..3 {
        assert!(get(host.addr, "/hello")?.starts_with("HTTP/1.1 200"));
    }
    assert!(get(host.addr, "/conformance/variables")?.starts_with("HTTP/1.1 200"));
    assert!(get(host.addr, "/conformance/pg")?.starts_with("HTTP/1.1 200"));
    assert!(get(host.addr, "/nowhere")?.starts_with("HTTP/1.1 404"));
    // The cron trigger fires every second.
    std::thread::sleep(Duration::from_millis(2200));

    let scrape = get(metrics, "/metrics")?;
    assert!(scrape.starts_with("HTTP/1.1 200"), "{scrape}");
    let value = |series: &str| -> f64 {
        scrape
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no `{series}` in\n{scrape}"))
    };
    // Start-up polled the well-known health route: counted under its own label.
    assert_eq!(
        value(r#"seckill_http_requests_total{route="/hello",status="200"}"#),
        3.0
    );
    assert_eq!(
        value(r#"seckill_http_requests_total{route="/conformance/...",status="200"}"#),
        2.0
    );
    assert_eq!(
        value(r#"seckill_http_requests_total{route="unmatched",status="404"}"#),
        1.0
    );
    assert!(
        value(r#"seckill_http_requests_total{route="/.well-known/spin/health",status="200"}"#)
            >= 1.0
    );
    assert_eq!(
        value(r#"seckill_http_request_duration_seconds_count{route="/hello"}"#),
        3.0
    );
    assert_eq!(
        value(r#"seckill_http_request_duration_seconds_bucket{le="+Inf",route="/hello"}"#),
        3.0
    );
    assert!(value(r#"seckill_cron_runs_total{component="cron-probe",outcome="ok"}"#) >= 1.0);
    assert!(value(r#"seckill_cron_run_duration_seconds_count{component="cron-probe"}"#) >= 1.0);
    let limit = f64::from(seckill_host::app::default_max_instances());
    assert_eq!(value("seckill_instances_limit"), limit, "64 per core");
    assert!(value("seckill_instances_in_use") <= 1.0);
    assert!(value("seckill_redis_connections_opened_total") >= 1.0);
    let pg_connections = value(r#"seckill_postgres_connections{state="in_use"}"#)
        + value(r#"seckill_postgres_connections{state="idle"}"#);
    assert!(pg_connections >= 1.0, "{scrape}");
    // This scrape's own connection is open; the `get`s before it closed theirs.
    assert!(value("seckill_http_connections") <= 1.0);
    assert!(get(metrics, "/other")?.starts_with("HTTP/1.1 404"));
    Ok(())
}

/// `--max-instances` and `--queue-interval`: while the one instance is busy past the wait, a
/// request is shed (`503`, `Retry-After`) and counted in `seckill_http_shed_requests_total`.
#[test]
fn a_shed_request_is_counted_by_route() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
    let host = host(
        &redis,
        &pg,
        &[
            "--metrics-listen",
            &metrics.to_string(),
            "--max-instances",
            "1",
            "--queue-interval",
            "100ms",
        ],
    )?;
    let addr = host.addr;
    let slow = std::thread::spawn(move || get(addr, "/conformance/slow-incr"));
    let mut shed = None;
    while shed.is_none() && !slow.is_finished() {
        let answer = get(addr, "/hello")?;
        if answer.starts_with("HTTP/1.1 503") {
            shed = Some(answer);
        }
    }
    let shed = shed.expect("a request was shed while the instance was busy");
    assert!(
        shed.to_ascii_lowercase().contains("retry-after: 1"),
        "{shed}"
    );
    assert!(slow.join().expect("no panic")?.starts_with("HTTP/1.1 200"));
    let scrape = get(metrics, "/metrics")?;
    let shed_count = scrape
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"seckill_http_shed_requests_total{route="/hello"} "#)?
                .parse::<f64>()
                .ok()
        })
        .unwrap_or_else(|| panic!("no shed count in\n{scrape}"));
    assert!(shed_count >= 1.0, "{scrape}");
    Ok(())
}

/// `--log-format json`: every line the host logs is one JSON object with a timestamp, level,
/// target and message, and an event's fields beside them. (A guest's own stderr, here its panic
/// message, passes through as it wrote it, as under Spin.)
#[test]
fn json_logs_are_one_object_per_line() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let host = host(&redis, &pg, &["--log-format", "json"])?;
    // A guest trap is logged with its component as a field.
    assert!(get(host.addr, "/conformance/trap")?.starts_with("HTTP/1.1 500"));
    std::thread::sleep(Duration::from_millis(200));
    let lines = host.log();
    let (host_lines, guest_lines): (Vec<_>, Vec<_>) =
        lines.iter().partition(|l| l.starts_with('{'));
    assert!(
        guest_lines
            .iter()
            .all(|l| !l.contains(" INFO ") && !l.contains(" ERROR ")),
        "a text log line: {guest_lines:?}"
    );
    let events: Vec<serde_json::Value> = host_lines
        .iter()
        .map(|l| serde_json::from_str(l).with_context(|| format!("not JSON: {l}")))
        .collect::<Result<_>>()?;
    for e in &events {
        for key in ["timestamp", "level", "target", "message"] {
            assert!(e.get(key).is_some(), "no {key} in {e}");
        }
    }
    assert!(
        events.iter().any(|e| e["level"] == "INFO"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("serving conformance on http://"))),
        "{lines:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["level"] == "ERROR" && e["component"] == "conformance"),
        "{lines:?}"
    );
    Ok(())
}

/// scripts/release.sh (packing what is built): the tarball holds the host, every component,
/// spin.toml pointing inside it, the migrations, the API, the unit and SHA256SUMS; unpacked, the
/// host serves the app from it.
#[test]
fn the_release_artifact_serves_from_its_unpacked_tree() -> Result<()> {
    let dist = tempfile::tempdir()?;
    let out = std::process::Command::new("bash")
        .arg(seckill_testkit::repo_root().join("scripts/release.sh"))
        .env("SECKILL_RELEASE_NO_BUILD", "1")
        .env("SECKILL_DIST_DIR", dist.path())
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tarball = String::from_utf8(out.stdout)?.trim().to_owned();
    assert!(
        tarball.contains("/seckill-") && tarball.ends_with(".tar.gz"),
        "{tarball}"
    );
    let listing = std::process::Command::new("tar")
        .args(["-tzf", &tarball])
        .output()?;
    let listing = String::from_utf8(listing.stdout)?;
    for file in [
        "./bin/seckill-host",
        "./spin.toml",
        "./wasm/server_time.wasm",
        "./wasm/buy.wasm",
        "./migrations/0001_orders.sql",
        "./api/openapi.yaml",
        "./seckill-host.service",
        "./SHA256SUMS",
    ] {
        assert!(
            listing.lines().any(|l| l == file),
            "no {file} in\n{listing}"
        );
    }

    let tree = tempfile::tempdir()?;
    let unpacked = std::process::Command::new("tar")
        .args(["-xzf", &tarball, "-C"])
        .arg(tree.path())
        .status()?;
    assert!(unpacked.success());
    let sums = std::process::Command::new("sha256sum")
        .args(["--quiet", "-c", "SHA256SUMS"])
        .current_dir(tree.path())
        .status()?;
    assert!(sums.success(), "SHA256SUMS does not match the files");
    let manifest = std::fs::read_to_string(tree.path().join("spin.toml"))?;
    assert!(
        manifest
            .lines()
            .filter(|l| l.starts_with("source = "))
            .all(|l| l.starts_with("source = \"wasm/")),
        "{manifest}"
    );

    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let manifest = tree.path().join("spin.toml");
    let host = HostProcess::start_binary(
        &tree.path().join("bin/seckill-host"),
        manifest.to_str().context("a UTF-8 path")?,
        &seckill_testkit::app_vars(&redis, &pg),
        &["--no-cron"],
    )?;
    let response = get(host.addr, "/api/time")?;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("\"now_ms\":"), "{response}");
    Ok(())
}

/// A request head past `--max-head-bytes` is `431`, not buffered without end.
#[test]
fn a_request_head_past_its_cap_is_431() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let host = host(&redis, &pg, &["--max-head-bytes", "16384"])?;
    let mut stream = connect(host.addr)?;
    write!(
        stream,
        "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(8_000)
    )?;
    assert_eq!(read_response(&mut stream)?.status(), 200, "under the cap");
    let mut stream = connect(host.addr)?;
    write!(
        stream,
        "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(40_000)
    )?;
    assert_eq!(read_response(&mut stream)?.status(), 431);
    Ok(())
}

/// One peer address holds at most `--max-connections-per-peer` connections (a trusted peer,
/// the proxy in front, is exempt): the next is closed as it arrives, and one frees a place.
#[test]
fn one_peer_holds_at_most_its_connections() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let args = ["--max-connections-per-peer", "3", "--trusted-peers", "none"];
    let host = host(&redis, &pg, &args)?;
    let peer: std::net::IpAddr = "127.0.0.2".parse()?;
    let connect = |addr| connect_from(peer, addr);
    let mut open: Vec<TcpStream> = (0..3).map(|_| connect(host.addr)).collect::<Result<_>>()?;
    for stream in &mut open {
        write!(stream, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")?;
        assert_eq!(read_response(stream)?.status(), 200);
    }
    let mut fourth = connect(host.addr)?;
    let _ = write!(fourth, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        closed_within(&mut fourth, Duration::from_secs(5))?,
        "the fourth is closed"
    );
    drop(open.pop());
    std::thread::sleep(Duration::from_millis(300));
    let mut again = connect(host.addr)?;
    write!(again, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")?;
    assert_eq!(
        read_response(&mut again)?.status(),
        200,
        "a place came free"
    );
    // Loopback trusted (the default): no cap for it.
    let host = self::host(&redis, &pg, &["--max-connections-per-peer", "3"])?;
    let mut many: Vec<TcpStream> = (0..6).map(|_| connect(host.addr)).collect::<Result<_>>()?;
    for stream in &mut many {
        write!(stream, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")?;
        assert_eq!(read_response(stream)?.status(), 200);
    }
    Ok(())
}

/// At the connection cap, a new connection (the payment provider's webhook, say) does not wait
/// in the listen backlog for a crowd's idle keep-alive connections to time out: an idle one is
/// closed to make room (once it has been idle `RECLAIMABLE_AFTER`, a second). A connection
/// that has not sent its first request yet is not idle in that sense and keeps its place.
#[test]
fn at_the_connection_cap_idle_keep_alive_connections_make_room() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let host = host(
        &redis,
        &pg,
        &["--max-connections", "4", "--idle-timeout", "120s"],
    )?;
    // The readiness probe's connections close first.
    std::thread::sleep(Duration::from_millis(500));
    let mut kept: Vec<TcpStream> = (0..3).map(|_| connect(host.addr)).collect::<Result<_>>()?;
    for stream in &mut kept {
        write!(stream, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")?;
        assert_eq!(read_response(stream)?.status(), 200);
    }
    let mut fresh = connect(host.addr)?;
    std::thread::sleep(Duration::from_millis(300));
    let mut arriving = connect(host.addr)?;
    write!(arriving, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")?;
    assert_eq!(
        read_response(&mut arriving)?.status(),
        200,
        "served long before the idle timeout"
    );
    let mut closed = 0;
    for stream in &mut kept {
        closed += usize::from(closed_within(stream, Duration::from_secs(2))?);
    }
    assert!(closed >= 1, "an idle keep-alive connection made room");
    fresh.set_read_timeout(Some(Duration::from_secs(15)))?;
    write!(fresh, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")?;
    assert_eq!(
        read_response(&mut fresh)?.status(),
        200,
        "a connection yet to send its first request keeps its place"
    );
    Ok(())
}

/// A client that stops reading while it is answered does not hold its connection for ever:
/// a write that makes no progress for `--write-timeout` ends it.
#[test]
fn a_client_that_stops_reading_is_let_go_after_the_write_timeout() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let host = host(&redis, &pg, &["--write-timeout", "1s"])?;
    let mut stream = connect(host.addr)?;
    // Pipelined requests whose answers (each echoes its 20 KB header) fill both sockets'
    // buffers while the client reads nothing; the writer ends when the host lets go.
    let request = format!(
        "GET /conformance/headers HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n",
        "p".repeat(20_000)
    );
    let (done, ended) = std::sync::mpsc::channel();
    let mut writer = stream.try_clone()?;
    std::thread::spawn(move || {
        for _ in 0..5_000 {
            if writer.write_all(request.as_bytes()).is_err() {
                break;
            }
        }
        let _ = done.send(());
    });
    let started = Instant::now();
    ended
        .recv_timeout(Duration::from_secs(30))
        .context("the host still holds the connection of a client that reads nothing")?;
    // The host closed it: what the client reads now ends.
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut sink = Vec::new();
    let _ = stream.read_to_end(&mut sink);
    assert!(started.elapsed() < Duration::from_secs(30));
    Ok(())
}

/// The host's own answers (no route, a trapped guest, a refused body) carry
/// `Cache-Control: no-store`: a CDN in front never keeps one for everyone.
#[test]
fn the_hosts_own_answers_are_never_cached() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let host = host(&redis, &pg, &["--max-request-body", "16"])?;
    for (request, status) in [
        (
            "GET /no-such-route HTTP/1.1\r\nHost: x\r\n\r\n".to_owned(),
            404,
        ),
        (
            "GET /conformance/trap HTTP/1.1\r\nHost: x\r\n\r\n".to_owned(),
            500,
        ),
        (
            format!(
                "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 32\r\n\r\n{}",
                "x".repeat(32)
            ),
            413,
        ),
    ] {
        let mut stream = connect(host.addr)?;
        stream.write_all(request.as_bytes())?;
        let resp = read_response(&mut stream)?;
        assert_eq!(resp.status(), status, "{}", resp.head);
        assert!(
            resp.head
                .to_ascii_lowercase()
                .contains("cache-control: no-store"),
            "{}",
            resp.head
        );
    }
    Ok(())
}

/// `--server-timing` has every answer say where its time at the host went (a guest's too);
/// without it only the host's shed answers do, and a guest's answer is as Spin gives it.
#[test]
fn server_timing_is_on_every_answer_only_when_asked() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let hello = |host: &HostProcess| -> Result<String> {
        let mut stream = connect(host.addr)?;
        stream.write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")?;
        let resp = read_response(&mut stream)?;
        assert_eq!(resp.status(), 200, "{}", resp.head);
        Ok(resp.head.to_ascii_lowercase())
    };
    let timed = host(&redis, &pg, &["--server-timing"])?;
    let head = hello(&timed)?;
    let timing = head
        .lines()
        .find_map(|l| l.strip_prefix("server-timing: "))
        .with_context(|| head.clone())?;
    let mut names = timing
        .split(", ")
        .map(|m| m.split(';').next().unwrap_or(""));
    // A connection's first request: also the time from its accept to the head's first byte.
    assert_eq!(
        (names.next(), names.next(), names.next()),
        (Some("queue"), Some("host"), Some("accept")),
        "{timing}"
    );
    drop(timed);
    let plain = host(&redis, &pg, &[])?;
    assert!(!hello(&plain)?.contains("server-timing"));
    Ok(())
}

/// `GET path` with a `traceparent` header, on a connection of its own.
fn get_traced(addr: SocketAddr, path: &str, traceparent: &str) -> Result<String> {
    let mut stream = connect(addr)?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\ntraceparent: {traceparent}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}

/// With `OTEL_EXPORTER_OTLP_ENDPOINT` set, a request with a W3C `traceparent` reaches an OTLP
/// receiver as its server span (named `{method} {route}`, a child of the incoming parent) and
/// the spans of its Redis and Postgres calls (children of it, in the same trace), named by
/// command or statement verb alone: no key, no SQL; an outbound HTTP request carries the trace.
#[test]
fn traces_follow_a_request_into_redis_and_postgres() -> Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let receiver = runtime.block_on(seckill_testkit::OtlpReceiver::start())?;
    let echo = std::net::TcpListener::bind("127.0.0.1:0")?;
    let echo_host = echo.local_addr()?.to_string();
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let host = HostProcess::start_with_env(
        "tests/manifests/conformance.toml",
        &[
            ("redis_host", redis.host()),
            ("pg_host", pg.host()),
            ("echo_host", echo_host),
        ],
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
        ],
    )?;
    let traces = [
        (
            "/conformance/redis",
            "redis",
            "4bf92f3577b34da6a3ce929d0e0e4736",
            "00f067aa0ba902b7",
        ),
        (
            "/conformance/pg",
            "postgresql",
            "0af7651916cd43dd8448eb211c80319c",
            "b7ad6b7169203331",
        ),
    ];
    for (path, _, trace, parent) in traces {
        let resp = get_traced(host.addr, path, &format!("00-{trace}-{parent}-01"))?;
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    }
    let spans = runtime.block_on(receiver.wait_for(Duration::from_secs(20), |spans| {
        traces.iter().all(|(_, system, trace, _)| {
            spans
                .iter()
                .any(|s| &s.trace_id == trace && s.attribute("db.system") == Some(system))
        })
    }));
    for (path, system, trace, parent) in traces {
        let server = spans
            .iter()
            .find(|s| s.trace_id == trace && s.parent_span_id == parent)
            .unwrap_or_else(|| {
                panic!("no server span of {path} under its traceparent: {spans:#?}")
            });
        assert_eq!(server.name, "GET /conformance/...", "{server:?}");
        assert_eq!(server.attribute("http.route"), Some("/conformance/..."));
        let calls: Vec<_> = spans
            .iter()
            .filter(|s| s.parent_span_id == server.span_id)
            .collect();
        assert!(
            calls
                .iter()
                .any(|s| s.attribute("db.system") == Some(system) && s.trace_id == trace),
            "no {system} span under {path}'s: {spans:#?}"
        );
    }
    // An outbound request carries the trace on: its `traceparent` names the request's trace
    // and the client span of the call.
    let echoed = std::thread::spawn(move || -> Result<String> {
        let (mut stream, _) = echo.accept()?;
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte)?;
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let traceparent = head
            .lines()
            .find_map(|l| l.strip_prefix("traceparent: "))
            .unwrap_or("")
            .to_owned();
        let body = format!("{{\"traceparent\":\"{traceparent}\"}}");
        write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )?;
        Ok(traceparent)
    });
    let trace = "5bf92f3577b34da6a3ce929d0e0e4737";
    let resp = get_traced(
        host.addr,
        "/conformance/outbound-echo",
        &format!("00-{trace}-10f067aa0ba902b8-01"),
    )?;
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    let sent = echoed.join().expect("the echo server")?;
    let spans = runtime.block_on(receiver.wait_for(Duration::from_secs(20), |spans| {
        spans
            .iter()
            .any(|s| s.trace_id == trace && s.attribute("http.request.method") == Some("GET"))
    }));
    let call = spans
        .iter()
        .find(|s| s.trace_id == trace && s.attribute("http.request.method") == Some("GET"))
        .unwrap_or_else(|| panic!("no outbound HTTP span: {spans:#?}"));
    assert_eq!(call.name, "GET");
    assert_eq!(sent, format!("00-{trace}-{}-01", call.span_id), "{resp}");

    // Low-cardinality names: a command or a verb, never a key or a statement.
    for span in spans.iter().filter(|s| s.attribute("db.system").is_some()) {
        assert!(
            span.name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_lowercase()),
            "{span:?}"
        );
    }
    Ok(())
}

/// `--runtime-config-file` with Spin's `[outbound_networking] block_networks = ["private"]`: an
/// outbound request the manifest allows, to a loopback destination named by address or by a name
/// that resolves to it, fails with `destination-ip-prohibited` and never connects (Spin's
/// `remove_blocked_addrs`); so does opening Redis on loopback, shared or per request (Spin
/// 3.6.3's `SpinDnsResolver` in `factor-outbound-redis`); a table the host does not read stops
/// it at startup.
#[test]
fn blocked_networks_refuse_an_allowed_destination_inside_them() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let echo = std::net::TcpListener::bind("127.0.0.1:0")?;
    echo.set_nonblocking(true)?;
    let port = echo.local_addr()?.port();
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("runtime-config.toml");
    std::fs::write(
        &config,
        "[outbound_networking]\nblock_networks = [\"private\"]\n",
    )?;
    let config = config.to_string_lossy().into_owned();
    for echo_host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let host = HostProcess::start(
            "tests/manifests/conformance.toml",
            &[
                ("redis_host", redis.host()),
                ("pg_host", pg.host()),
                ("echo_host", echo_host.clone()),
            ],
            &["--runtime-config-file", &config],
        )?;
        let resp = get(host.addr, "/conformance/outbound-echo")?;
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        assert!(
            resp.contains("DestinationIpProhibited"),
            "{echo_host}: {resp}"
        );
        assert_eq!(
            echo.accept().map_err(|e| e.kind()).err(),
            Some(ErrorKind::WouldBlock),
            "{echo_host}: a connection reached the blocked destination"
        );
        let resp = get(host.addr, "/conformance/redis")?;
        assert!(resp.contains(r#""open":"Err("#), "{echo_host}: {resp}");
    }
    let faithful = HostProcess::start(
        "tests/manifests/conformance.toml",
        &[("redis_host", redis.host()), ("pg_host", pg.host())],
        &["--runtime-config-file", &config, "--spin-faithful"],
    )?;
    let resp = get(faithful.addr, "/conformance/redis")?;
    assert!(resp.contains(r#""open":"Err("#), "per request: {resp}");
    drop(faithful);
    let other = dir.path().join("other.toml");
    std::fs::write(&other, "[[key_value_store]]\ntype = \"redis\"\n")?;
    let refused = HostProcess::start(
        "tests/manifests/conformance.toml",
        &[("redis_host", redis.host()), ("pg_host", pg.host())],
        &["--runtime-config-file", &other.to_string_lossy()],
    );
    let Err(e) = refused else {
        bail!("a runtime config the host does not read was accepted")
    };
    assert!(format!("{e:#}").contains("key_value_store"), "{e:#}");
    Ok(())
}
