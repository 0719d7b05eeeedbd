//! Connections that stamp each exchange at the buyer's socket: when the request's first bytes
//! were written and when the kernel received the answer's latest bytes (`SO_TIMESTAMPNS`).
//!
//! The buyers share two cores with the host: a buyer woken with ten thousand others reads its
//! answer late, and that wait is this machine's, not the sale's. A buyer on a device of their
//! own pays neither, so the demo prints this figure beside the one its tasks measure.

use std::io::{self, IoSliceMut};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};
use nix::sys::time::TimeSpec;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// The latest exchange on one connection, in nanoseconds of the realtime clock (the kernel's
/// receive stamps use it).
#[derive(Debug, Default, Clone, Copy)]
struct Exchange {
    /// The first write after the last read: the request leaving.
    sent_ns: u64,
    /// The latest data received since (0: none yet).
    received_ns: u64,
    /// Whether a read came after `sent_ns`, so that the next write starts a new exchange.
    read_since_sent: bool,
}

/// A connection's exchange, shared with every response read on it (as hyper's connection
/// extra): taken when the response head is in the caller's hands, before the connection can
/// carry another request.
#[derive(Debug, Clone, Default)]
pub struct Wire(Arc<Mutex<Exchange>>);

impl Wire {
    /// From the request's first byte written to the latest byte of its answer received, if
    /// both were stamped and in that order.
    pub fn round_trip(&self) -> Option<Duration> {
        let e = *self.0.lock().unwrap();
        (e.received_ns >= e.sent_ns && e.sent_ns > 0)
            .then(|| Duration::from_nanos(e.received_ns - e.sent_ns))
    }

    fn wrote(&self) {
        let mut e = self.0.lock().unwrap();
        if e.sent_ns == 0 || e.read_since_sent {
            *e = Exchange {
                sent_ns: now_ns(),
                ..Exchange::default()
            };
        }
    }

    fn received(&self, at_ns: u64) {
        let mut e = self.0.lock().unwrap();
        e.received_ns = e.received_ns.max(at_ns);
        e.read_since_sent = true;
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A TCP stream whose reads take the kernel's receive stamp and whose writes mark a request's
/// start.
pub struct Stamped {
    tcp: TcpStream,
    wire: Wire,
}

impl Stamped {
    fn new(tcp: TcpStream) -> io::Result<Self> {
        setsockopt(&tcp, sockopt::ReceiveTimestampns, &true)?;
        Ok(Stamped {
            tcp,
            wire: Wire::default(),
        })
    }

    /// One `recvmsg` into `buf`: the bytes read and the kernel's receive stamp, if it gave one.
    fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
        let mut iov = [IoSliceMut::new(buf)];
        let mut control = nix::cmsg_space!(TimeSpec);
        let msg = recvmsg::<()>(
            self.tcp.as_raw_fd(),
            &mut iov,
            Some(&mut control),
            MsgFlags::empty(),
        )?;
        let stamp = msg.cmsgs()?.find_map(|c| match c {
            ControlMessageOwned::ScmTimestampns(ts) => {
                Some(ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64)
            }
            _ => None,
        });
        Ok((msg.bytes, stamp))
    }
}

impl AsyncRead for Stamped {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            ready!(self.tcp.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match self.tcp.try_io(Interest::READABLE, || self.recv(unfilled)) {
                Ok((n, stamp)) => {
                    buf.advance(n);
                    if n > 0 {
                        self.wire.received(stamp.unwrap_or_else(now_ns));
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Stamped {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.wire.wrote();
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

impl Connection for Stamped {
    fn connected(&self) -> Connected {
        self.tcp.connected().extra(self.wire.clone())
    }
}

/// Hyper's HTTP connector, handing out [`Stamped`] streams.
#[derive(Clone)]
pub struct StampedConnector(pub HttpConnector);

impl tower_service::Service<http::Uri> for StampedConnector {
    type Response = TokioIo<Stamped>;
    type Error = io::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = io::Result<TokioIo<Stamped>>> + Send + 'static>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.poll_ready(cx).map_err(io::Error::other)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let tcp = connecting.await.map_err(io::Error::other)?.into_inner();
            Ok(TokioIo::new(Stamped::new(tcp)?))
        })
    }
}
