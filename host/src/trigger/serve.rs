//! Serving the HTTP trigger as a production runtime: a cap on open connections (and on those of
//! one peer), on a request head's size, header, body, idle and write timeouts, graceful
//! shutdown and a lingering close. At the connection cap, idle keep-alive connections are closed
//! to make room, as nginx reuses its keep-alive connections when it runs out: a crowd's idle
//! connections never keep the payment provider's webhook waiting in the listen backlog. What a
//! request gets is [`super::http::handle`]'s; this module only decides how long a connection
//! may take and how it ends, so responses are the same whichever options are set.
//!
//! A connection is in one of three phases ([`Phase`]): idle, before its first request or between
//! requests (the idle timeout), reading a request head (the header timeout, from the head's
//! first byte: a client that sent its head promptly is never cut off because a busy server was
//! slow to read it), or serving a request (no deadline of the connection's own: the trigger
//! reads the body under its own deadline, the guest takes what it takes). hyper's own
//! `header_read_timeout` cannot tell the first from the third: it starts as soon as hyper waits
//! for a head, so an idle keep-alive connection would get the header timeout.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use http::Request;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, futures::OwnedNotified};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

use crate::runtime::Runtime;
use crate::trigger::http::{Arrived, ConnectionError, HttpTrigger, ResponseBody, handle};
use crate::trigger::metrics::Metrics;

/// How connections are served.
#[derive(Clone)]
pub struct ServeOptions {
    /// A request head must arrive whole within this of its first byte (slowloris).
    pub header_timeout: Duration,
    /// A keep-alive connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// Connections open at once; more wait in the listen backlog while idle keep-alive
    /// connections are closed to make room ([`RECLAIM_BATCH`] at a time).
    pub max_connections: u32,
    /// Connections open at once from one peer address; more are closed as they arrive.
    pub max_connections_per_peer: u32,
    /// Peers exempt from [`Self::max_connections_per_peer`]: the proxies in front (a load
    /// balancer is one peer for all its clients).
    pub trusted_peers: Vec<ipnet::IpNet>,
    /// The most a request head may take (request line and headers): past it, `431`.
    pub max_head_bytes: usize,
    /// A response write that makes no progress for this long (the client stopped reading)
    /// ends the connection.
    pub write_timeout: Duration,
    /// Every answer says where its time at the host went (`Server-Timing`), not only a shed
    /// one ([`crate::trigger::http::server_timing`]).
    pub server_timing: bool,
    /// Where requests and connections are counted, if anywhere.
    pub metrics: Option<Arc<Metrics>>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(75),
            max_connections: 10_000,
            max_connections_per_peer: 1_000,
            trusted_peers: Vec::new(),
            max_head_bytes: 32 << 10,
            write_timeout: Duration::from_secs(30),
            server_timing: false,
            metrics: None,
        }
    }
}

/// Connections open per peer address, for [`ServeOptions::max_connections_per_peer`].
#[derive(Default)]
struct Peers(Mutex<std::collections::HashMap<std::net::IpAddr, u32>>);

impl Peers {
    /// Counts a connection from `peer`, unless it already has `max` open: then `None`.
    fn open(self: &Arc<Self>, peer: std::net::IpAddr, max: u32) -> Option<PeerConnection> {
        let mut open = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let n = open.entry(peer).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(PeerConnection(self.clone(), peer))
    }
}

/// A connection counted against its peer while it lives.
struct PeerConnection(Arc<Peers>, std::net::IpAddr);

impl Drop for PeerConnection {
    fn drop(&mut self) {
        let mut open = self.0.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.1);
            }
        }
    }
}

/// After a response that ends the connection, what the client still sends is read and thrown
/// away for at most this long in all, or until it pauses for [`LINGER_PAUSE`], or sends
/// [`LINGER_BYTES`]: a socket closed with unread input resets the connection, and a client still
/// writing its body (a 413) then sees EPIPE or ECONNRESET instead of the response it was sent.
const LINGER_TIME: Duration = Duration::from_secs(10);
const LINGER_PAUSE: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 16 << 20;

/// Idle keep-alive connections asked to close each time a connection arrives at the cap: a
/// burst of arrivals finds room without closing every idle connection at once (nginx frees 32).
const RECLAIM_BATCH: usize = 32;

/// How long a kept-alive connection is idle before it may be closed to make room: until then
/// it stays out of the line (joining it takes a lock, which the requests of a busy connection
/// would pay each time). At the cap with nobody in the line yet, the first to join goes.
const RECLAIMABLE_AFTER: Duration = Duration::from_secs(1);

/// Serves the HTTP trigger of `app` on `listener` until `shutdown` is cancelled; then stops
/// accepting (the listening socket closes, so new connections are refused), lets each request in
/// flight finish and returns once every connection has closed. The caller bounds that wait.
///
/// Connections are accepted and served on a runtime of their own (the front: accepting,
/// reading requests, queue control, writing answers); guests run on the caller's runtime
/// ([`handle`] hands each admitted request over). In a spike the guests keep their runtime's
/// workers busy, and a task among theirs is polled once per round of all of them: were the
/// front's tasks there, the crowd would wait in the kernel's accept queue and in those rounds,
/// where the queue control cannot see it, and a request it sheds would still wait its turn to
/// be answered. On a front of its own, whose work per request is small, a request reaches the
/// queue control at once and a shed one is answered at once.
pub async fn serve<A>(
    app: Arc<A>,
    listener: TcpListener,
    options: ServeOptions,
    shutdown: CancellationToken,
) -> Result<()>
where
    A: AsRef<HttpTrigger> + Send + Sync + 'static,
{
    let max_connections = options.max_connections;
    let open = Arc::new(Semaphore::new(max_connections as usize));
    let options = Arc::new(options);
    // Stops the accept loop when this future ends or is dropped, as well as on `shutdown`.
    let stop = shutdown.child_token();
    let _stop_on_drop = stop.clone().drop_guard();
    let (served_all, done) = tokio::sync::oneshot::channel();
    let front = Front {
        listener: listener.into_std()?,
        guests: tokio::runtime::Handle::current(),
        open,
        max_connections,
        idle: Arc::new(Notify::new()),
        stop,
    };
    std::thread::Builder::new()
        .name("seckill-front".into())
        .spawn(move || {
            if let Err(e) = front.run(app, options, shutdown) {
                tracing::error!("the accept loop stopped: {e}");
            }
            let _ = served_all.send(());
        })?;
    let _ = done.await;
    Ok(())
}

/// The front runtime's work: what it accepts from, and where guests run.
struct Front {
    listener: std::net::TcpListener,
    guests: tokio::runtime::Handle,
    open: Arc<Semaphore>,
    max_connections: u32,
    /// Idle keep-alive connections wait on it: each one notified closes.
    idle: Arc<Notify>,
    stop: CancellationToken,
}

impl Front {
    /// Accepts until stopped and serves each connection, on a runtime of the front's own with a
    /// worker per core; returns once every connection has closed.
    fn run<A>(
        self,
        app: Arc<A>,
        options: Arc<ServeOptions>,
        shutdown: CancellationToken,
    ) -> io::Result<()>
    where
        A: AsRef<HttpTrigger> + Send + Sync + 'static,
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .thread_name("seckill-front")
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let listener = TcpListener::from_std(self.listener)?;
            let peers = Arc::new(Peers::default());
            loop {
                let (stream, client, permit) = tokio::select! {
                    biased;
                    _ = self.stop.cancelled() => break,
                    accepted = accept(&listener, &self.open, &self.idle) => accepted,
                };
                let accepted = Instant::now();
                let peer = client.ip().to_canonical();
                let counted = match options.trusted_peers.iter().any(|n| n.contains(&peer)) {
                    true => None,
                    false => match peers.open(peer, options.max_connections_per_peer) {
                        Some(counted) => Some(counted),
                        None => {
                            // Closed at once: one address does not hold every connection.
                            tracing::debug!("{peer} has too many connections open");
                            if let Some(m) = &options.metrics {
                                m.peer_refused();
                            }
                            continue;
                        }
                    },
                };
                let (app, options, shutdown) = (app.clone(), options.clone(), shutdown.clone());
                let (guests, idle) = (self.guests.clone(), self.idle.clone());
                tokio::spawn(async move {
                    let serving = Serving {
                        app,
                        guests,
                        client,
                        accepted,
                        idle,
                    };
                    serving.connection(stream, &options, &shutdown).await;
                    drop((permit, counted));
                });
            }
            drop(listener);
            // Each connection holds a permit until it has closed.
            let _ = self.open.acquire_many(self.max_connections).await;
            Ok(())
        })
    }
}

/// The next connection, once there is room for it: at the cap, the longest idle keep-alive
/// connections are asked to close.
async fn accept(
    listener: &TcpListener,
    open: &Arc<Semaphore>,
    idle: &Notify,
) -> (TcpStream, SocketAddr, OwnedSemaphorePermit) {
    let permit = match open.clone().try_acquire_owned() {
        Ok(permit) => permit,
        Err(_) => {
            // Waiters are woken in the order they began to wait: the longest idle first.
            for _ in 0..RECLAIM_BATCH {
                idle.notify_one();
            }
            open.clone()
                .acquire_owned()
                .await
                .expect("the semaphore is never closed")
        }
    };
    loop {
        match listener.accept().await {
            Ok((stream, client)) => return (stream, client, permit),
            Err(e) => {
                // Out of file descriptors and the like: keep serving.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// One connection: the app, where its guests run, and who it came from and when.
struct Serving<A> {
    app: Arc<A>,
    guests: tokio::runtime::Handle,
    client: SocketAddr,
    accepted: Instant,
    /// Where the connection waits while idle, to be closed at the connection cap.
    idle: Arc<Notify>,
}

impl<A> Serving<A>
where
    A: AsRef<HttpTrigger> + Send + Sync + 'static,
{
    /// Serves the connection until it closes, or until its request in flight is answered after
    /// `shutdown`.
    async fn connection(
        self,
        stream: TcpStream,
        options: &ServeOptions,
        shutdown: &CancellationToken,
    ) {
        let Serving {
            app,
            guests,
            client,
            accepted,
            idle,
        } = self;
        let _ = stream.set_nodelay(true);
        let _open = options.metrics.clone().map(OpenConnection::new);
        let clock = Arc::new(Clock::new());
        let io = Watched::new(stream, clock.clone(), idle, options);
        let metrics = options.metrics.clone();
        let server_timing = options.server_timing;
        let first = std::sync::atomic::AtomicBool::new(true);
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            // A request arrives with its connection, or later with its head's first byte.
            let (phase, since) = clock.get();
            let headed = if phase == Phase::Head {
                since
            } else {
                Instant::now()
            };
            let first = first.swap(false, std::sync::atomic::Ordering::Relaxed);
            let arrived = if first { accepted } else { headed };
            req.extensions_mut().insert(Arrived(arrived));
            // Set before the future is first polled: hyper may read the body before that.
            clock.set(Phase::Serving);
            let (app, guests, clock, metrics) =
                (app.clone(), guests.clone(), clock.clone(), metrics.clone());
            async move {
                let start = Instant::now();
                let mut resp = handle((*app).as_ref(), req, client, &guests).await?;
                if server_timing {
                    let accept = first.then(|| headed.saturating_duration_since(accepted));
                    crate::trigger::http::server_timing(&mut resp, arrived, accept);
                }
                if let Some(metrics) = &metrics {
                    metrics.request(&resp, start.elapsed());
                }
                Ok::<_, ConnectionError>(resp.map(|body| Answered { body, clock }))
            }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .max_buf_size(options.max_head_bytes)
            .serve_connection(TokioIo::new(io), service);
        let mut conn = std::pin::pin!(conn);
        let ended = tokio::select! {
            ended = conn.as_mut() => ended,
            _ = shutdown.cancelled() => {
                // No keep-alive: an idle connection closes now, a busy one after its response.
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        if let Err(e) = ended {
            tracing::debug!("connection from {client} ended: {e}");
        }
    }
}

/// Counts a connection as open while it lives.
struct OpenConnection(Arc<Metrics>);

impl OpenConnection {
    fn new(metrics: Arc<Metrics>) -> Self {
        metrics.connection(1);
        OpenConnection(metrics)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connection(-1);
    }
}

/// Where a connection is between requests, and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for (the rest of) a request head.
    Head,
    /// A request is being served: from its head to the end of its response.
    Serving,
    /// Before the first request or between requests, nothing received yet.
    Idle,
}

/// A connection's phase, shared by its socket, its service and its responses.
struct Clock(Mutex<ClockState>);

struct ClockState {
    phase: Phase,
    since: Instant,
    /// The socket's reader, parked while a request was served: the phase that follows has a
    /// deadline for it to arm.
    reader: Option<Waker>,
    /// A request has been answered: idle now means kept alive, which may be reclaimed (a new
    /// connection is not, its first request may be on its way).
    kept_alive: bool,
}

impl Clock {
    fn new() -> Self {
        Clock(Mutex::new(ClockState {
            phase: Phase::Idle,
            since: Instant::now(),
            reader: None,
            kept_alive: false,
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn get(&self) -> (Phase, Instant) {
        let state = self.lock();
        (state.phase, state.since)
    }

    fn set(&self, phase: Phase) {
        let mut state = self.lock();
        (state.phase, state.since) = (phase, Instant::now());
        state.kept_alive |= phase == Phase::Idle;
        if let Some(reader) = state.reader.take() {
            reader.wake();
        }
    }

    /// The phase, for a reader about to wait: while a request is served it waits without a
    /// deadline, woken when the phase changes. Also whether it was kept alive.
    fn watch(&self, reader: &Waker) -> (Phase, Instant, bool) {
        let mut state = self.lock();
        if state.phase == Phase::Serving {
            state.reader = Some(reader.clone());
        }
        (state.phase, state.since, state.kept_alive)
    }

    /// Bytes arrived: an idle connection starts a request head.
    fn received(&self) {
        let mut state = self.lock();
        if state.phase == Phase::Idle {
            (state.phase, state.since) = (Phase::Head, Instant::now());
        }
    }
}

/// The socket, as hyper sees it: reads fail with `TimedOut` past the phase's deadline, and
/// shutting down lingers (see [`LINGER_TIME`]).
struct Watched {
    stream: TcpStream,
    clock: Arc<Clock>,
    header_timeout: Duration,
    idle_timeout: Duration,
    /// The phase's deadline, or the lingering's.
    timer: Pin<Box<Sleep>>,
    /// Set once the write side is shut.
    lingering: Option<Lingering>,
    write_timeout: Duration,
    /// Set while a write makes no progress: when it fires, the client stopped reading.
    write_stalled: Option<Pin<Box<Sleep>>>,
    /// Where an idle connection waits to be reclaimed at the connection cap.
    idle: Arc<Notify>,
    /// Set while idle: waiting in line on [`Self::idle`]; dropped (out of line) otherwise.
    reclaim: Option<Pin<Box<OwnedNotified>>>,
    metrics: Option<Arc<Metrics>>,
}

impl Watched {
    fn new(
        stream: TcpStream,
        clock: Arc<Clock>,
        idle: Arc<Notify>,
        options: &ServeOptions,
    ) -> Self {
        Watched {
            stream,
            clock,
            header_timeout: options.header_timeout,
            idle_timeout: options.idle_timeout,
            timer: Box::pin(tokio::time::sleep(options.idle_timeout)),
            lingering: None,
            write_timeout: options.write_timeout,
            write_stalled: None,
            idle,
            reclaim: None,
            metrics: options.metrics.clone(),
        }
    }

    /// Ready once the connection, idle, is to close to make room for a new one.
    fn poll_reclaimed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let idle = &self.idle;
        let reclaim = self
            .reclaim
            .get_or_insert_with(|| Box::pin(idle.clone().notified_owned()));
        ready!(reclaim.as_mut().poll(cx));
        self.reclaim = None;
        if let Some(m) = &self.metrics {
            m.idle_reclaimed();
        }
        Poll::Ready(())
    }

    /// `write` on the socket, ending the connection when it has made no progress for the
    /// write timeout.
    fn poll_writing<T>(
        &mut self,
        cx: &mut Context<'_>,
        write: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match write(Pin::new(&mut self.stream), cx) {
            Poll::Pending => {
                let timeout = self.write_timeout;
                let stalled = self
                    .write_stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                ready!(stalled.as_mut().poll(cx));
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client stopped reading",
                )))
            }
            done => {
                self.write_stalled = None;
                done
            }
        }
    }

    /// Pending until `deadline`, then ready.
    fn poll_until(&mut self, cx: &mut Context<'_>, deadline: Instant) -> Poll<()> {
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        self.timer.as_mut().poll(cx)
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.clock.received();
                    // Out of the idle line: a notification it held passes to the next.
                    this.reclaim = None;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                let (phase, since, kept_alive) = this.clock.watch(cx.waker());
                let (limit, what) = match phase {
                    Phase::Head => (this.header_timeout, "request head timed out"),
                    Phase::Idle => {
                        if kept_alive {
                            // Joining the line takes a lock: a connection between a client's
                            // quick requests does not, one idle for RECLAIMABLE_AFTER does.
                            let reclaimable = since + RECLAIMABLE_AFTER;
                            let idle_end = since + this.idle_timeout;
                            if Instant::now() < reclaimable
                                && this.poll_until(cx, reclaimable.min(idle_end)).is_pending()
                            {
                                return Poll::Pending;
                            }
                            if this.poll_reclaimed(cx).is_ready() {
                                return Poll::Ready(Err(io::Error::new(
                                    io::ErrorKind::TimedOut,
                                    "idle keep-alive closed at the connection cap",
                                )));
                            }
                        }
                        (this.idle_timeout, "idle keep-alive timed out")
                    }
                    Phase::Serving => return Poll::Pending,
                };
                ready!(this.poll_until(cx, since + limit));
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, what)))
            }
            failed => failed,
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_writing(cx, |s, cx| s.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_writing(cx, |s, cx| s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_writing(cx, |s, cx| s.poll_flush(cx))
    }

    /// hyper shuts the socket down when it ends a connection cleanly (`Connection: close`, a
    /// graceful shutdown, the client's EOF): send our FIN, then linger.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.lingering.is_none() {
            ready!(Pin::new(&mut this.stream).poll_shutdown(cx))?;
            let now = Instant::now();
            this.lingering = Some(Lingering {
                until: now + LINGER_TIME,
                last: now,
                discarded: 0,
            });
        }
        let mut scratch = [0u8; 16 << 10];
        loop {
            let linger = this.lingering.as_mut().expect("set above");
            if linger.discarded >= LINGER_BYTES {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.stream).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                    linger.discarded += buf.filled().len();
                    linger.last = Instant::now();
                }
                // EOF (the client closed) or an error: nothing more to wait for.
                Poll::Ready(_) => return Poll::Ready(Ok(())),
                Poll::Pending => {
                    let deadline = linger.until.min(linger.last + LINGER_PAUSE);
                    ready!(this.poll_until(cx, deadline));
                    return Poll::Ready(Ok(()));
                }
            }
        }
    }
}

/// A closing connection's lingering.
struct Lingering {
    /// When it ends at the latest.
    until: Instant,
    /// When the client last sent something.
    last: Instant,
    /// Bytes thrown away.
    discarded: usize,
}

/// A response body that marks its connection idle once hyper is done with it.
struct Answered {
    body: ResponseBody,
    clock: Arc<Clock>,
}

impl Body for Answered {
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Answered {
    fn drop(&mut self) {
        self.clock.set(Phase::Idle);
    }
}

/// Waits until no guest instance of `runtime` is alive.
pub async fn instances_done(runtime: &Runtime) {
    runtime.slots().idle().await;
    let cron = crate::runtime::CRON_INSTANCES;
    let _ = runtime.cron_slots().acquire_many(cron).await;
}
