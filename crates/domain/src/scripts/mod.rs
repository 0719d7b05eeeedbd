//! Every Lua script, in one place, each with a typed face. Sources live in `crates/domain/lua/`, each
//! with a header declaring its keys, arguments and OK reply; `build.rs` turns that one
//! declaration into the Lua names (`K_CFG`, `A_USER`) and the Rust `<script>_contract` module
//! (`Keys`, `Args`, `OkReply`), prepends the reply codes (`codes.in`) and `crates/domain/lua/lib/`,
//! and computes each SHA1. One module per script, mini-redis style: which keys and arguments
//! (by name), and the reply read front to back through a [`Reader`] — no positions by hand.

pub mod admission_terms;
pub mod archive_event;
pub mod buy;
pub mod deny;
pub mod drain_claim;
pub mod drain_confirm;
pub mod drain_failed;
pub mod drain_read;
pub mod drain_release;
pub mod draw;
pub mod event_info;
pub mod global_limit;
pub mod health;
pub mod issue_token;
pub mod job_lease;
pub mod list_events;
pub mod poll;
pub mod precheck;
pub mod read_config;
pub mod reconcile_orders;
pub mod reconcile_read;
pub mod register_event;
pub mod set_fields;
pub mod set_order_status;
pub mod set_refund;
pub mod shard_credit;
pub mod shard_lend;
pub mod shard_lent;
pub mod shard_picture;
pub mod shard_refilled;
pub mod shard_settle;
pub mod status;
pub mod summarize;
pub mod upsert_event;
pub mod warmup;

use crate::error::{Error, ErrorCode};
use crate::keys::OrderStatus;
use crate::store::{Replies, Reply, Store, StoreError, StoreErrorKind};

/// A Lua script and its SHA1, ready for EVALSHA.
#[derive(Debug)]
pub struct Script {
    /// File name without `.lua`.
    pub name: &'static str,
    /// Full source (reply codes, common helpers, body).
    pub source: &'static str,
    /// SHA1 of `source`, hex.
    pub sha: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/scripts.rs"));

/// Reply codes, the first element of every script's reply, as constants and as the
/// [`ReplyCode`](code::ReplyCode) enum (generated from `codes.in`, which also gives Lua its
/// constants).
pub mod code {
    include!(concat!(env!("OUT_DIR"), "/codes.rs"));
}

/// Why a script said no: the refusals scripts answer, with their details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No such event.
    NotFound,
    /// Switched off, or not warmed up yet.
    Paused,
    /// Before the start.
    TooEarly {
        /// Until the start.
        wait_ms: u64,
    },
    /// After the end.
    Ended,
    /// Every shard is empty.
    SoldOut,
    /// Purchase token missing, wrong, used or expired.
    BadToken,
    /// The user already has an order.
    Already {
        /// That order.
        order_id: String,
    },
    /// A token bucket is empty.
    Limited,
    /// On a deny list.
    Denied,
    /// Every admission token is handed out.
    AdmissionClosed,
    /// Lottery: not drawn, or registration closed.
    NotSelected,
    /// The change conflicts with the event's state.
    Conflict,
    /// Admission has not opened yet.
    NotOpen {
        /// Until it opens.
        wait_ms: u64,
    },
    /// The admission's proof of work is missing or below the event's difficulty.
    ChallengeRequired {
        /// The difficulty asked now.
        difficulty: u32,
    },
    /// The solved challenge was used already.
    ChallengeUsed,
    /// The admission token names an earlier version of the event's admission.
    StaleAdmission,
    /// Gray release: the user is outside the share the event lets in now.
    NotReleased,
    /// The request reached a shard's slot that is not the user's home (see
    /// [`crate::sharded`]); changed nothing.
    WrongShard {
        /// The event's shard count, to find the home with.
        shards: u32,
    },
}

/// A script's refusal in the domain's words (the edge gives each code its HTTP status).
impl From<Refusal> for Error {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::NotFound => Error::refused(ErrorCode::EventNotFound, "no such event"),
            Refusal::Paused => Error::refused_for(
                ErrorCode::SalePaused,
                "the sale is paused or not warmed up yet",
                5_000,
            ),
            Refusal::TooEarly { wait_ms } => Error::refused_for(
                ErrorCode::TooEarly,
                format!("the sale starts in {wait_ms} ms"),
                wait_ms,
            ),
            Refusal::Ended => Error::refused(ErrorCode::SaleEnded, "the sale has ended"),
            Refusal::SoldOut => Error::refused(ErrorCode::SoldOut, "sold out"),
            Refusal::BadToken => Error::refused(
                ErrorCode::BadPurchaseToken,
                "purchase token missing, used, expired or not yours: run precheck again",
            ),
            Refusal::Already { order_id } => Error::refused(
                ErrorCode::AlreadyBought,
                format!("you already have order {order_id}"),
            ),
            Refusal::Limited => Error::refused_for(
                ErrorCode::RateLimited,
                "too many requests; slow down",
                1_000,
            ),
            Refusal::Denied => {
                Error::refused(ErrorCode::Denied, "not allowed to take part in this sale")
            }
            Refusal::AdmissionClosed => Error::refused(
                ErrorCode::AdmissionClosed,
                "all admission tokens are handed out",
            ),
            Refusal::NotSelected => {
                Error::refused(ErrorCode::NotSelected, "not drawn in the lottery")
            }
            Refusal::Conflict => {
                Error::refused(ErrorCode::Conflict, "conflicts with the event's state")
            }
            Refusal::NotOpen { wait_ms } => Error::refused_for(
                ErrorCode::AdmissionNotOpen,
                format!("admission opens in {wait_ms} ms"),
                wait_ms,
            ),
            Refusal::ChallengeRequired { difficulty } => Error::refused(
                ErrorCode::ChallengeRequired,
                format!(
                    "admission asks a proof of work of {difficulty} bits: solve a new challenge"
                ),
            ),
            Refusal::ChallengeUsed => Error::refused(
                ErrorCode::ChallengeUsed,
                "this challenge was used already: solve a new one",
            ),
            Refusal::NotReleased => Error::refused(
                ErrorCode::NotReleased,
                "the sale is open to a share of buyers that does not include you yet; try again later",
            ),
            Refusal::StaleAdmission => Error::refused(
                ErrorCode::NotAdmitted,
                "the admission token is from an earlier version of this event: ask again",
            ),
            // The sharded calls find the home again; one that reaches the edge is a bug.
            Refusal::WrongShard { shards } => Error::bug(format!(
                "a request reached a shard that is not its home (the event has {shards} shards)"
            )),
        }
    }
}

impl From<ScriptError> for Error {
    fn from(e: ScriptError) -> Self {
        match e {
            ScriptError::Store(e) => e.into(),
            ScriptError::Refused(r) => r.into(),
        }
    }
}

impl Refusal {
    /// The refusal a reply code stands for, details left empty (`None` for codes that are not
    /// refusals, and values no script answers). The one table from codes to refusals; the
    /// counts hash is keyed by these codes. The match names every code, so a code added to
    /// `codes.in` does not build until it is placed here.
    pub fn of_code(value: i64) -> Option<Refusal> {
        use code::ReplyCode as C;
        Some(match C::of(value)? {
            C::NotFound => Refusal::NotFound,
            C::Paused => Refusal::Paused,
            C::TooEarly => Refusal::TooEarly { wait_ms: 0 },
            C::Ended => Refusal::Ended,
            C::SoldOut => Refusal::SoldOut,
            C::BadToken => Refusal::BadToken,
            C::Already => Refusal::Already {
                order_id: String::new(),
            },
            C::Limited => Refusal::Limited,
            C::Denied => Refusal::Denied,
            C::AdmissionClosed => Refusal::AdmissionClosed,
            C::NotSelected => Refusal::NotSelected,
            C::Conflict => Refusal::Conflict,
            C::WrongShard => Refusal::WrongShard { shards: 0 },
            C::NotOpen => Refusal::NotOpen { wait_ms: 0 },
            C::ChallengeRequired => Refusal::ChallengeRequired { difficulty: 0 },
            C::ChallengeUsed => Refusal::ChallengeUsed,
            C::StaleAdmission => Refusal::StaleAdmission,
            C::NotReleased => Refusal::NotReleased,
            // Answers the scripts' own modules read: success, the lottery's registration, no
            // order, the tail's candidates.
            C::Ok | C::Registered | C::None | C::Tail => return None,
        })
    }
}

/// A script run that did not end the way its caller wanted.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// Redis could not run it, or it replied with something its module does not expect.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The script said no.
    #[error("refused: {0:?}")]
    Refused(Refusal),
}

/// A script's reply, read front to back; [`Reader::finish`] checks nothing is left over.
#[derive(Debug)]
pub struct Reader {
    script: &'static str,
    items: std::vec::IntoIter<Reply>,
    at: usize,
}

impl Reader {
    /// A reader over `replies` of `script`.
    pub fn new(script: &'static str, replies: Replies) -> Self {
        Reader {
            script,
            items: replies.0.into_iter(),
            at: 0,
        }
    }

    fn bad(&self, what: &str, got: &Option<Reply>) -> StoreError {
        StoreError::failed(format!(
            "{}: element {} is not {what}: {got:?}",
            self.script, self.at
        ))
    }

    fn next(&mut self) -> Option<Reply> {
        self.at += 1;
        self.items.next()
    }

    /// The next element, an integer (Lua number, or a string of one).
    pub fn next_int(&mut self) -> Result<i64, StoreError> {
        let item = self.next();
        match &item {
            Some(Reply::Int(v)) => Ok(*v),
            Some(Reply::Bytes(b)) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| self.bad("a number", &item)),
            _ => Err(self.bad("a number", &item)),
        }
    }

    /// The next element, a 0/1 flag.
    pub fn next_flag(&mut self) -> Result<bool, StoreError> {
        match self.next_int()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(self.bad("0 or 1", &Some(Reply::Int(v)))),
        }
    }

    /// The next element, a non-negative integer that fits 32 bits.
    pub fn next_u32(&mut self) -> Result<u32, StoreError> {
        let v = self.next_int()?;
        u32::try_from(v).map_err(|_| self.bad("a 32-bit count", &Some(Reply::Int(v))))
    }

    /// The next element, a non-negative integer.
    pub fn next_u64(&mut self) -> Result<u64, StoreError> {
        let v = self.next_int()?;
        u64::try_from(v).map_err(|_| self.bad("a non-negative number", &Some(Reply::Int(v))))
    }

    /// The next element, an order's status word ([`OrderStatus`]).
    pub fn next_order_status(&mut self) -> Result<OrderStatus, StoreError> {
        let word = self.next_text()?;
        OrderStatus::parse(&word)
            .ok_or_else(|| self.bad("an order status", &Some(Reply::Bytes(word.into_bytes()))))
    }

    /// The next element, text.
    pub fn next_text(&mut self) -> Result<String, StoreError> {
        let item = self.next();
        match item {
            Some(Reply::Bytes(b)) => Ok(String::from_utf8_lossy(&b).into_owned()),
            Some(Reply::Status(s)) => Ok(s),
            Some(Reply::Int(v)) => Ok(v.to_string()),
            other => Err(self.bad("text", &other)),
        }
    }

    /// Whether elements are left.
    pub fn has_more(&self) -> bool {
        self.items.len() > 0
    }

    /// Ends the read: every element must have been taken.
    pub fn finish(mut self) -> Result<(), StoreError> {
        self.expect_end()
    }

    /// Checks every element was taken.
    pub fn expect_end(&mut self) -> Result<(), StoreError> {
        match self.next() {
            None => Ok(()),
            extra => Err(self.bad("the end of the reply", &extra)),
        }
    }

    /// The refusal `code` stands for, with its details; the reply must end there.
    pub fn refusal(mut self, code: i64) -> Result<Refusal, StoreError> {
        let refusal = match Refusal::of_code(code) {
            Some(Refusal::TooEarly { .. }) => Refusal::TooEarly {
                wait_ms: self.next_int()?.max(0) as u64,
            },
            Some(Refusal::Already { .. }) => Refusal::Already {
                order_id: self.next_text()?,
            },
            Some(Refusal::WrongShard { .. }) => Refusal::WrongShard {
                shards: self.next_u32()?,
            },
            Some(Refusal::NotOpen { .. }) => Refusal::NotOpen {
                wait_ms: self.next_int()?.max(0) as u64,
            },
            Some(Refusal::ChallengeRequired { .. }) => Refusal::ChallengeRequired {
                difficulty: self.next_u32()?,
            },
            Some(refusal) => refusal,
            None => {
                return Err(StoreError::failed(format!(
                    "{}: unexpected reply code {code}",
                    self.script
                )));
            }
        };
        self.finish()?;
        Ok(refusal)
    }
}

/// The script whose SHA1 is `sha`, for stores that look at what they run (tests, fakes).
pub fn by_sha(sha: &str) -> Option<&'static Script> {
    ALL.iter().copied().find(|s| s.sha == sha)
}

/// Runs `script`: EVALSHA, and EVAL only when Redis no longer holds it (NOSCRIPT, after a
/// restart or a failover), so a request sends the script's source at most once per node and
/// restart. Errors name the script.
pub fn run(
    store: &impl Store,
    script: &Script,
    keys: &[String],
    args: &[String],
) -> Result<Replies, StoreError> {
    match store.evalsha(script.sha, keys, args) {
        Err(e) if e.kind == StoreErrorKind::NoScript => store.eval(script.source, keys, args),
        other => other,
    }
    .map_err(|e| e.context(script.name))
}

/// Runs `script` and reads its reply code: the code and a reader positioned after it.
fn call(
    store: &impl Store,
    script: &'static Script,
    keys: &[String],
    args: &[String],
) -> Result<(i64, Reader), StoreError> {
    let mut reader = Reader::new(script.name, run(store, script, keys, args)?);
    let code = reader.next_int()?;
    Ok((code, reader))
}

/// Runs a script whose one success is `OK`: the reader after the code, or the refusal.
fn call_ok(
    store: &impl Store,
    script: &'static Script,
    keys: &[String],
    args: &[String],
) -> Result<Reader, ScriptError> {
    match call(store, script, keys, args)? {
        (code::OK, reader) => Ok(reader),
        (code, reader) => Err(ScriptError::Refused(reader.refusal(code)?)),
    }
}

/// (a, b) pairs as script arguments, flat: field/value pairs, (stream id, order id) pairs…
fn flat_pairs<A: AsRef<str>, B: AsRef<str>>(
    pairs: impl IntoIterator<Item = (A, B)>,
) -> Vec<String> {
    pairs
        .into_iter()
        .flat_map(|(a, b)| [a.as_ref().to_owned(), b.as_ref().to_owned()])
        .collect()
}
