//! Who is asking. Buyers: an HS256 JWT from the shop's login (`sub` = user id). Admission: an
//! HMAC bound to event, user, the event's admission version and an expiry, checked without
//! touching Redis. Operators: named bearer secrets with a role ([`Operators`]), compared in
//! constant time.
//!
//! HS256 is a few lines over RustCrypto's `hmac`/`sha2`, which build for wasm32 as they are;
//! the `jsonwebtoken` crate would pull RSA and EC backends we never use into every guest.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::{Error, ErrorCode};

type HmacSha256 = Hmac<Sha256>;

/// The claims we read from a buyer's token.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claims {
    /// The user id.
    pub sub: String,
    /// Expiry, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<u64>,
    /// Not before, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
}

fn unauthorized(message: &str) -> Error {
    Error::refused(ErrorCode::Unauthorized, message)
}

fn mac(secret: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length")
}

/// Signs claims as an HS256 JWT (the shop's login does this; tests and the simulator too).
pub fn sign_jwt(claims: &Claims, secret: &[u8]) -> String {
    let header = B64.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = B64.encode(serde_json::to_vec(claims).expect("claims serialize"));
    let signing_input = format!("{header}.{payload}");
    let mut m = mac(secret);
    m.update(signing_input.as_bytes());
    format!("{signing_input}.{}", B64.encode(m.finalize().into_bytes()))
}

/// Verifies an HS256 JWT and returns its claims. Only HS256 is accepted (never `none`).
pub fn verify_jwt(token: &str, secret: &[u8], now_s: u64) -> Result<Claims, Error> {
    let mut parts = token.split('.');
    let (Some(raw_header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(unauthorized("malformed token"));
    };
    #[derive(Deserialize)]
    struct Header {
        alg: String,
    }
    let header: Header = B64
        .decode(raw_header)
        .ok()
        .and_then(|h| serde_json::from_slice(&h).ok())
        .ok_or_else(|| unauthorized("malformed token header"))?;
    if header.alg != "HS256" {
        return Err(unauthorized("unsupported token algorithm"));
    }
    let signature = B64
        .decode(signature)
        .map_err(|_| unauthorized("malformed signature"))?;
    let mut m = mac(secret);
    // The signing input is `header.payload`, exactly as received.
    m.update(&token.as_bytes()[..raw_header.len() + 1 + payload.len()]);
    m.verify_slice(&signature)
        .map_err(|_| unauthorized("bad signature"))?;
    let claims: Claims = B64
        .decode(payload)
        .ok()
        .and_then(|p| serde_json::from_slice(&p).ok())
        .ok_or_else(|| unauthorized("malformed token claims"))?;
    // A login token without an expiry would be valid forever: refuse it.
    match claims.exp {
        None => return Err(unauthorized("token has no expiry")),
        Some(exp) if now_s >= exp => return Err(unauthorized("token expired")),
        Some(_) => {}
    }
    if claims.nbf.is_some_and(|nbf| now_s < nbf) {
        return Err(unauthorized("token not yet valid"));
    }
    check_user_id(&claims.sub)?;
    Ok(claims)
}

/// User ids become parts of Redis keys: printable ASCII, no spaces, at most 128 bytes.
pub fn check_user_id(user: &str) -> Result<(), Error> {
    let ok = !user.is_empty() && user.len() <= 128 && user.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(unauthorized("token subject is not a valid user id"))
    }
}

/// What an admission token holds beside its signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionTerms {
    /// The event's `admission_version` when it was issued: re-creating the event or switching
    /// its admission mode makes a new one, and precheck refuses tokens of an older one.
    pub version: String,
    /// After this (Unix seconds) the token is refused.
    pub expires_s: u64,
}

/// How long after the end of its event's sale (at issue) an admission token lives: room for an
/// operator to move the end later.
pub const ADMISSION_GRACE_S: u64 = 3_600;

impl AdmissionTerms {
    /// The terms of a token issued under `version` for a sale ending at `end_ms`: it lives
    /// [`ADMISSION_GRACE_S`] past the end.
    pub fn until_end(version: String, end_ms: u64) -> Self {
        AdmissionTerms {
            version,
            expires_s: end_ms / 1000 + ADMISSION_GRACE_S,
        }
    }
}

fn admission_mac(secret: &[u8], event: &str, user: &str, terms: &AdmissionTerms) -> HmacSha256 {
    let mut m = mac(secret);
    m.update(
        format!(
            "seckill-admission\n{event}\n{user}\n{}\n{}",
            terms.version, terms.expires_s
        )
        .as_bytes(),
    );
    m
}

/// The admission token of `user` for `event` under `terms`: `a2.<expires_s>.<version>.<mac>`.
/// Deterministic, so asking twice gives the same one.
pub fn admission_token(secret: &[u8], event: &str, user: &str, terms: &AdmissionTerms) -> String {
    let sig = admission_mac(secret, event, user, terms)
        .finalize()
        .into_bytes();
    format!(
        "a2.{}.{}.{}",
        terms.expires_s,
        terms.version,
        B64.encode(sig)
    )
}

/// Checks an admission token without Redis: only we can have made it, for this user and event,
/// and it has not expired. Returns its terms: precheck compares the version with the event's.
pub fn verify_admission(
    secret: &[u8],
    event: &str,
    user: &str,
    token: &str,
    now_s: u64,
) -> Result<AdmissionTerms, Error> {
    let not_admitted = || {
        Error::refused(
            ErrorCode::NotAdmitted,
            "no valid admission token for this event",
        )
    };
    let mut parts = token.split('.');
    let (Some("a2"), Some(expires_s), Some(version), Some(sig), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(not_admitted());
    };
    let terms = AdmissionTerms {
        version: version.to_owned(),
        expires_s: expires_s.parse().map_err(|_| not_admitted())?,
    };
    let sig = B64.decode(sig).map_err(|_| not_admitted())?;
    admission_mac(secret, event, user, &terms)
        .verify_slice(&sig)
        .map_err(|_| not_admitted())?;
    if now_s >= terms.expires_s {
        return Err(Error::refused(
            ErrorCode::NotAdmitted,
            "the admission token has expired",
        ));
    }
    Ok(terms)
}

/// What an operator may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads only: the events, their state, the health report, the audit.
    Viewer,
    /// Reads and writes: events, switches, deny lists, draw, warm-up, the jobs.
    Operator,
    /// Runs the scheduled jobs (`/admin/jobs/*`) and nothing else: the credential a scheduler
    /// (a ticker, a cron service) holds, so that none holds a person's power.
    Scheduler,
}

impl Role {
    /// The name in the `operators` variable and the audit.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Scheduler => "scheduler",
        }
    }

    /// The role named `name`.
    pub fn parse(name: &str) -> Option<Role> {
        match name {
            "viewer" => Some(Role::Viewer),
            "operator" => Some(Role::Operator),
            "scheduler" => Some(Role::Scheduler),
            _ => None,
        }
    }
}

/// An operator whose secret matched: who changed what, in the audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    /// The name the `operators` variable gives them.
    pub name: String,
    /// What they may do.
    pub role: Role,
}

impl Operator {
    /// Lets an operator through to a write; a viewer or a scheduler gets `403 forbidden`.
    pub fn may_write(&self) -> Result<(), Error> {
        match self.role {
            Role::Operator => Ok(()),
            Role::Viewer => Err(forbidden(format!(
                "{} is a viewer: viewers may only read",
                self.name
            ))),
            Role::Scheduler => Err(self.only_jobs()),
        }
    }

    /// Lets a person (a viewer or an operator) through to a read; a scheduler gets
    /// `403 forbidden`.
    pub fn may_read(&self) -> Result<(), Error> {
        match self.role {
            Role::Viewer | Role::Operator => Ok(()),
            Role::Scheduler => Err(self.only_jobs()),
        }
    }

    /// Lets an operator or a scheduler run the jobs; a viewer gets `403 forbidden`.
    pub fn may_run_jobs(&self) -> Result<(), Error> {
        match self.role {
            Role::Operator | Role::Scheduler => Ok(()),
            Role::Viewer => Err(forbidden(format!(
                "{} is a viewer: the jobs write",
                self.name
            ))),
        }
    }

    fn only_jobs(&self) -> Error {
        forbidden(format!(
            "{} is a scheduler: schedulers may only run the jobs",
            self.name
        ))
    }
}

fn forbidden(message: String) -> Error {
    Error::refused(ErrorCode::Forbidden, message)
}

/// Whether `name` can name an operator in the audit: 1-64 of `[A-Za-z0-9._@-]`.
fn is_operator_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'))
}

/// The operators' credentials, from the `operators` variable: `name:role:secret` entries
/// separated by commas (blanks around them ignored; the secret is everything after the second
/// `:`). One name may hold two secrets, so a secret is rotated by adding the new one, moving the
/// clients over, then removing the old one: no moment without a valid secret.
#[derive(Clone)]
pub struct Operators {
    entries: Vec<(Operator, [u8; 32])>,
}

impl Operators {
    /// Parses the variable. A malformed entry, an unknown role, a name with two roles, a secret
    /// given twice or no entry at all is a configuration error (`Error::Bug`: 500); its detail
    /// names the entry by position and name, never the secret.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let mut entries: Vec<(Operator, [u8; 32])> = Vec::new();
        for (i, entry) in text.split(',').map(str::trim).enumerate() {
            let bad = |why: &str| Error::bug(format!("operators: entry {}: {why}", i + 1));
            let mut parts = entry.splitn(3, ':');
            let (Some(name), Some(role), Some(secret)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(bad("expected name:role:secret"));
            };
            if !is_operator_name(name) {
                return Err(bad("a name is 1-64 of A-Z a-z 0-9 . _ @ -"));
            }
            let bad = |why: &str| bad(&format!("{name}: {why}"));
            let role = Role::parse(role).ok_or_else(|| bad("the role is viewer or operator"))?;
            if secret.is_empty() {
                return Err(bad("the secret is empty"));
            }
            let digest: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
            for (other, other_digest) in &entries {
                if other.name == name && other.role != role {
                    return Err(bad("one name, two roles"));
                }
                if *other_digest == digest {
                    return Err(bad(&format!("the same secret as {}", other.name)));
                }
            }
            let name = name.to_owned();
            entries.push((Operator { name, role }, digest));
        }
        Ok(Operators { entries })
    }

    /// The operator whose secret is `presented`. Every entry is compared, in constant time
    /// and without stopping at a match (hashing first hides the length too), so the time taken
    /// tells nothing about which entry, or how much of one, matched.
    pub fn authenticate(&self, presented: Option<&str>) -> Result<Operator, Error> {
        use subtle::ConditionallySelectable;
        let presented = presented.ok_or_else(|| unauthorized("admin token required"))?;
        let digest = Sha256::digest(presented.as_bytes());
        let none = u32::MAX;
        let mut found = none;
        for (i, (_, secret)) in self.entries.iter().enumerate() {
            let index = u32::try_from(i).unwrap_or(none);
            found.conditional_assign(&index, digest.as_slice().ct_eq(secret.as_slice()));
        }
        self.entries
            .get(found as usize)
            .map(|(operator, _)| operator.clone())
            .ok_or_else(|| unauthorized("bad admin token"))
    }
}

/// Compares a scheduler's job key (`?key=`, for schedulers that cannot send a header) in
/// constant time; an empty `expected` (no `job_key` set) accepts nothing.
pub fn check_job_key(presented: &str, expected: &str) -> Result<(), Error> {
    check_secret(presented, expected).map_err(|()| unauthorized("bad job key"))
}

/// Constant-time equality of two secrets (hashing first hides the length too); nothing equals
/// an empty secret.
fn check_secret(presented: &str, expected: &str) -> Result<(), ()> {
    let a = Sha256::digest(presented.as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    if bool::from(a.ct_eq(&b)) && !expected.is_empty() {
        Ok(())
    } else {
        Err(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(sub: &str, exp: Option<u64>) -> Claims {
        Claims {
            sub: sub.into(),
            exp,
            nbf: None,
        }
    }

    #[test]
    fn jwt_round_trip_and_refusals() {
        let t = sign_jwt(&claims("u1", Some(2_000)), b"k");
        assert_eq!(verify_jwt(&t, b"k", 1_000).unwrap().sub, "u1");
        assert_eq!(
            verify_jwt(&t, b"other", 1_000).unwrap_err().code(),
            ErrorCode::Unauthorized
        );
        assert_eq!(
            verify_jwt(&t, b"k", 2_000).unwrap_err().reason(),
            "token expired"
        );
        // Tampered payload keeps the old signature.
        let parts: Vec<&str> = t.split('.').collect();
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            B64.encode(br#"{"sub":"admin"}"#),
            parts[2]
        );
        assert_eq!(
            verify_jwt(&forged, b"k", 1_000).unwrap_err().reason(),
            "bad signature"
        );
        // alg=none is never accepted.
        let none = format!("{}.{}.", B64.encode(br#"{"alg":"none"}"#), parts[1]);
        assert!(verify_jwt(&none, b"k", 1_000).is_err());
        assert!(verify_jwt("garbage", b"k", 1_000).is_err());
        assert_eq!(
            verify_jwt(&sign_jwt(&claims("u1", None), b"k"), b"k", 1)
                .unwrap_err()
                .reason(),
            "token has no expiry"
        );
        let bad_sub = sign_jwt(&claims("has space", Some(2_000)), b"k");
        assert!(verify_jwt(&bad_sub, b"k", 1_000).is_err());
    }

    #[test]
    fn admission_tokens_bind_user_event_version_and_expiry() {
        let terms = AdmissionTerms {
            version: "0v1".into(),
            expires_s: 2_000,
        };
        let t = admission_token(b"s", "e1", "u1", &terms);
        assert_eq!(t, admission_token(b"s", "e1", "u1", &terms));
        assert_eq!(
            verify_admission(b"s", "e1", "u1", &t, 1_000).unwrap(),
            terms
        );
        let refused = |secret: &[u8], event, user, token: &str, now| {
            verify_admission(secret, event, user, token, now)
                .unwrap_err()
                .code()
        };
        assert_eq!(refused(b"s", "e1", "u2", &t, 1_000), ErrorCode::NotAdmitted);
        assert_eq!(refused(b"s", "e2", "u1", &t, 1_000), ErrorCode::NotAdmitted);
        assert_eq!(refused(b"x", "e1", "u1", &t, 1_000), ErrorCode::NotAdmitted);
        assert_eq!(refused(b"s", "e1", "u1", &t, 2_000), ErrorCode::NotAdmitted);
        assert_eq!(
            refused(b"s", "e1", "u1", "a1.AAAA", 1_000),
            ErrorCode::NotAdmitted
        );
        // Another version or a later expiry written in keeps the old signature.
        let sig = t.rsplit('.').next().unwrap();
        for forged in [format!("a2.2000.0v2.{sig}"), format!("a2.9000.0v1.{sig}")] {
            assert_eq!(
                refused(b"s", "e1", "u1", &forged, 1_000),
                ErrorCode::NotAdmitted
            );
        }
    }

    const TEAM: &str = "ann:operator:s3cret-ann, vic:viewer:s3cret-vic";

    #[test]
    fn a_scheduler_runs_the_jobs_and_nothing_else() {
        let ops = Operators::parse("tick:scheduler:s3cret-tick, vic:viewer:s3cret-vic").unwrap();
        let tick = ops.authenticate(Some("s3cret-tick")).unwrap();
        assert_eq!(tick.role, Role::Scheduler);
        assert!(tick.may_run_jobs().is_ok());
        assert_eq!(tick.may_read().unwrap_err().code(), ErrorCode::Forbidden);
        assert_eq!(tick.may_write().unwrap_err().code(), ErrorCode::Forbidden);
        let vic = ops.authenticate(Some("s3cret-vic")).unwrap();
        assert!(vic.may_read().is_ok());
        assert_eq!(vic.may_run_jobs().unwrap_err().code(), ErrorCode::Forbidden);
    }

    #[test]
    fn each_secret_names_its_operator_and_role() {
        let ops = Operators::parse(TEAM).unwrap();
        let ann = ops.authenticate(Some("s3cret-ann")).unwrap();
        assert_eq!((ann.name.as_str(), ann.role), ("ann", Role::Operator));
        assert!(ann.may_write().is_ok());
        let vic = ops.authenticate(Some("s3cret-vic")).unwrap();
        assert_eq!((vic.name.as_str(), vic.role), ("vic", Role::Viewer));
        assert_eq!(vic.may_write().unwrap_err().code(), ErrorCode::Forbidden);
        for wrong in [
            Some("s3cret-anN"),
            Some(""),
            Some("ann"),
            Some("ann:operator:s3cret-ann"),
        ] {
            assert_eq!(
                ops.authenticate(wrong).unwrap_err().reason(),
                "bad admin token",
                "{wrong:?}"
            );
        }
        assert_eq!(
            ops.authenticate(None).unwrap_err().reason(),
            "admin token required"
        );
    }

    #[test]
    fn a_rotation_holds_two_secrets_of_one_operator() {
        let ops = Operators::parse("ann:operator:old-one,ann:operator:new-one").unwrap();
        for secret in ["old-one", "new-one"] {
            assert_eq!(ops.authenticate(Some(secret)).unwrap().name, "ann");
        }
        // The secret is everything after the second colon.
        let ops = Operators::parse("bob:viewer:a:b:c").unwrap();
        assert_eq!(ops.authenticate(Some("a:b:c")).unwrap().role, Role::Viewer);
    }

    #[test]
    fn a_malformed_operators_variable_is_a_configuration_error_that_hides_the_secrets() {
        for (bad, why) in [
            ("", "entry 1: expected name:role:secret"),
            ("ann:operator", "entry 1: expected name:role:secret"),
            ("ann:operator:s1,,", "entry 2: expected name:role:secret"),
            (
                "ann:admin:s1",
                "entry 1: ann: the role is viewer or operator",
            ),
            ("a nn:viewer:s1", "entry 1: a name is 1-64"),
            ("ann:viewer:", "entry 1: ann: the secret is empty"),
            (
                "ann:viewer:s1,ann:operator:s2",
                "entry 2: ann: one name, two roles",
            ),
            (
                "ann:viewer:s1,bob:viewer:s1",
                "entry 2: bob: the same secret as ann",
            ),
        ] {
            let e = Operators::parse(bad).err().expect(bad);
            assert_eq!(e.code(), ErrorCode::Internal, "{bad}");
            let reason = e.reason();
            assert!(
                reason.starts_with(&format!("operators: {why}")),
                "{bad}: {reason}"
            );
            assert!(!reason.contains("s1") && !reason.contains("s2"), "{reason}");
        }
    }

    #[test]
    fn job_key_compare() {
        assert!(check_job_key("k3y", "k3y").is_ok());
        assert!(check_job_key("k3y", "k3Y").is_err());
        assert!(
            check_job_key("", "").is_err(),
            "no job_key set: no key works"
        );
    }
}
