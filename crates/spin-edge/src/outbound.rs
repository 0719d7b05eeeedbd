//! One outbound HTTP request over Spin's `wasi:http`, whole body in and out: what the Upstash
//! REST store and the payment provider's API send.
//!
//! Straight on `wasi:http`, the calls spin-sdk's `http::send` makes minus what a request here
//! does not need (its executor, header maps both ways): the REST store runs this on every buy,
//! and each host call and allocation counts (`README.md`, "Upstash over REST", has what a REST
//! buy costs).

use spin_sdk::wit::wasi::http0_2_0::outgoing_handler;
use spin_sdk::wit::wasi::http0_2_0::types::{
    Fields, IncomingResponse, Method, OutgoingBody, OutgoingRequest, Scheme,
};
use wasi::io::streams::{OutputStream, StreamError};

/// Bytes asked for per read of a response body (the host returns what it has, up to this).
const READ_SIZE: u64 = 64 * 1024;

/// A request.
pub struct Outbound<'a> {
    /// `https`, or `http` for a local stand-in.
    pub https: bool,
    /// `host[:port]`.
    pub authority: &'a str,
    /// `POST`, or `GET` (then `body` is empty).
    pub post: bool,
    /// Path and query.
    pub path: &'a str,
    /// Request headers (a `content-length` is added).
    pub headers: &'a [(&'a str, &'a [u8])],
    pub body: &'a [u8],
}

/// Sends `req`: the status and the whole response body.
pub fn send(req: &Outbound) -> Result<(u16, Vec<u8>), String> {
    let mut list: Vec<(String, Vec<u8>)> = req
        .headers
        .iter()
        .map(|(name, value)| ((*name).to_owned(), value.to_vec()))
        .collect();
    if req.post {
        // A declared length: no chunked framing, head and body in one write.
        list.push((
            "content-length".into(),
            req.body.len().to_string().into_bytes(),
        ));
    }
    let headers = Fields::from_list(&list).map_err(|e| format!("headers: {e:?}"))?;
    let request = OutgoingRequest::new(headers);
    let scheme = if req.https {
        Scheme::Https
    } else {
        Scheme::Http
    };
    let method = if req.post { Method::Post } else { Method::Get };
    request
        .set_method(&method)
        .and(request.set_scheme(Some(&scheme)))
        .and(request.set_authority(Some(req.authority)))
        .and(request.set_path_with_query(Some(req.path)))
        .map_err(|()| "an invalid request line".to_owned())?;
    let outgoing = request.body().map_err(|()| "no request body")?;
    let stream = outgoing.write().map_err(|()| "no request body stream")?;
    // What the stream takes in one write (all of a command, on Spin) goes before `handle`, so
    // the request leaves whole with nothing to wait for; any rest streams after it, as further
    // writes may wait for the host to drain the first.
    let body = req.body;
    let first = body
        .len()
        .min(usize::try_from(stream.check_write().map_err(stream_error)?).unwrap_or(usize::MAX));
    if first > 0 {
        stream.write(&body[..first]).map_err(stream_error)?;
        stream.flush().map_err(stream_error)?;
    }
    // (A refused request, e.g. a host not in `allowed_outbound_hosts`, fails right here.)
    let response = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    write_all(&stream, &body[first..])?;
    drop(stream);
    OutgoingBody::finish(outgoing, None).map_err(|e| format!("{e:?}"))?;
    response.subscribe().block();
    let response: IncomingResponse = response
        .get()
        .ok_or("no response after the wait")?
        .map_err(|()| "the response was taken")?
        .map_err(|e| format!("{e:?}"))?;
    let status = response.status();
    let incoming = response.consume().map_err(|()| "no response body")?;
    let input = incoming.stream().map_err(|()| "no response body stream")?;
    let mut out = Vec::new();
    loop {
        match input.blocking_read(READ_SIZE) {
            Ok(chunk) => out.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(e) => return Err(stream_error(e)),
        }
    }
    Ok((status, out))
}

/// Writes all of `body` (nothing when it is empty), waiting for the stream whenever it is full.
fn write_all(stream: &OutputStream, mut body: &[u8]) -> Result<(), String> {
    if body.is_empty() {
        return Ok(());
    }
    while !body.is_empty() {
        let n = match stream.check_write().map_err(stream_error)? {
            0 => {
                stream.subscribe().block();
                continue;
            }
            n => body.len().min(usize::try_from(n).unwrap_or(usize::MAX)),
        };
        stream.write(&body[..n]).map_err(stream_error)?;
        body = &body[n..];
    }
    stream.blocking_flush().map_err(stream_error)
}

/// A stream failure, in words.
fn stream_error(e: StreamError) -> String {
    match e {
        StreamError::Closed => "the stream closed".into(),
        StreamError::LastOperationFailed(e) => e.to_debug_string(),
    }
}
