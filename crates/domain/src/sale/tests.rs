//! The sale's Rust logic over a fake Redis: what each operation sends, and what it makes of
//! each reply. The scripts' own behaviour is tested on a real Redis (`tests/`).

use super::*;
use crate::error::ErrorCode;
use crate::scripts::{BUY, ISSUE_TOKEN, POLL, READ_CONFIG, SHARD_LEND, code};
use crate::store::{Reply, StoreError, StoreErrorKind};
use crate::testing::FakeStore;

fn event() -> EventId {
    EventId::parse("e1").unwrap()
}

/// The shard count the callers of these tests know.
const SHARDS: u32 = 8;

fn buy(store: &FakeStore) -> Result<Accepted, Error> {
    super::buy(
        &Nodes::one(store),
        &event(),
        SHARDS,
        "u1",
        "token",
        1_764_000_000_000,
    )
    .map(|b| b.accepted)
}

#[test]
fn a_buy_sends_one_evalsha_with_the_keys_of_its_home_shard_and_user() {
    let store =
        FakeStore::holding_every_script().answers(&BUY, &[0.into(), 7.into(), 2.into(), 3.into()]);
    buy(&store).unwrap();
    let calls = store.calls.borrow();
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].command, calls[0].script), ("EVALSHA", "buy"));
    let home = crate::ids::home_shard("e1", "u1", SHARDS);
    let slot = format!("{{sk:e1/{home}}}");
    assert!(
        calls[0].keys.iter().all(|k| k.starts_with(&slot)),
        "{:?}",
        calls[0].keys
    );
    assert_eq!(calls[0].keys[1], format!("{slot}:ptok:u1"));
    assert_eq!(calls[0].args[..2], ["u1".to_owned(), "token".to_owned()]);
}

#[test]
fn an_accepted_buy_is_queued_behind_the_orders_not_yet_drained() {
    let store =
        FakeStore::holding_every_script().answers(&BUY, &[0.into(), 7.into(), 2.into(), 3.into()]);
    let accepted = buy(&store).unwrap();
    assert_eq!(
        (accepted.status, accepted.position, accepted.shard),
        (OrderStatus::Queued, 4, 2)
    );
}

#[test]
fn a_tail_skips_a_candidate_that_refuses_and_lends_from_the_next() {
    let store = FakeStore::holding_every_script()
        .answers(&BUY, &[code::TAIL.into(), 5.into(), 6.into()])
        .answers(&SHARD_LEND, &[code::NOT_FOUND.into()])
        .answers(&SHARD_LEND, &[0.into(), 1.into(), 3.into()])
        .answers(&BUY, &[0.into(), 7.into(), 2.into(), 3.into()]);
    let accepted = buy(&store).unwrap();
    assert_eq!(accepted.status, OrderStatus::Queued);
    assert_eq!(
        store.commands(),
        [
            ("EVALSHA", "buy"),
            ("EVALSHA", "shard_lend"),
            ("EVALSHA", "shard_lend"),
            ("EVALSHA", "buy")
        ]
    );
    // The unit the second candidate lent comes home: buy.lua's credit_id and credit_units.
    let back = &store.calls.borrow()[3];
    assert!(
        !back.args[4].is_empty() && back.args[5] == "1",
        "{:?}",
        back.args
    );
}

/// Near a sell-out most of the home's picture has run dry: the first candidate probed knows
/// every other but the last to be empty, and the tail goes on to the last one, though it comes
/// after the first [`TAIL_CANDIDATES`] in the home's list.
#[test]
fn a_tail_strikes_what_a_probe_knows_empty_from_its_whole_list_and_reaches_the_last_units() {
    const SHARDS: u32 = 64;
    let last = TAIL_CANDIDATES as i64 + 8;
    let user = (0..)
        .map(|i| format!("u{i}"))
        .find(|u| crate::ids::home_shard("e1", u, SHARDS) == 0)
        .unwrap();
    let mut home_says = vec![code::TAIL.into()];
    home_says.extend((1..=last).map(Reply::from));
    let mut first_probe = vec![0.into(), 0.into(), 0.into()];
    for s in 2..last {
        first_probe.extend([Reply::from(s), Reply::from(1_764_000_001_000_i64)]);
    }
    let store = FakeStore::holding_every_script()
        .answers(&BUY, &home_says)
        .answers(&SHARD_LEND, &first_probe)
        .answers(&SHARD_LEND, &[0.into(), 1.into(), 0.into()])
        .answers(&BUY, &[0.into(), 7.into(), 0.into(), 3.into()]);
    let bought = super::buy(
        &Nodes::one(&store),
        &event(),
        SHARDS,
        &user,
        "token",
        1_764_000_000_000,
    )
    .unwrap();
    assert_eq!(bought.round_trips, 4);
    let calls = store.calls.borrow();
    assert_eq!(calls[2].script, "shard_lend");
    assert!(
        calls[2].keys[0].starts_with(&format!("{{sk:e1/{last}}}")),
        "{:?}",
        calls[2].keys
    );
}

#[test]
fn an_order_the_drain_has_passed_is_still_at_position_one() {
    assert_eq!(queue_position(5, 9), 1);
    assert_eq!(queue_position(5, 4), 1);
    assert_eq!(queue_position(5, 0), 5);
}

#[test]
fn a_script_redis_lost_is_sent_once_more_whole() {
    let store = FakeStore::default().answers(&BUY, &[0.into(), 1.into(), 0.into(), 0.into()]);
    buy(&store).unwrap();
    assert_eq!(store.commands(), [("EVALSHA", "buy"), ("EVAL", "buy")]);
}

#[test]
fn each_refusal_of_the_buy_script_has_its_code() {
    for (reply, expected) in [
        (vec![code::SOLD_OUT.into()], ErrorCode::SoldOut),
        (vec![code::BAD_TOKEN.into()], ErrorCode::BadPurchaseToken),
        (
            vec![code::ALREADY.into(), "o1".into()],
            ErrorCode::AlreadyBought,
        ),
        (vec![code::LIMITED.into()], ErrorCode::RateLimited),
        (vec![code::PAUSED.into()], ErrorCode::SalePaused),
        (vec![code::ENDED.into()], ErrorCode::SaleEnded),
        (vec![code::NOT_FOUND.into()], ErrorCode::EventNotFound),
        (
            vec![code::TOO_EARLY.into(), 1_500.into()],
            ErrorCode::TooEarly,
        ),
    ] {
        let mut store = FakeStore::holding_every_script().answers(&BUY, &reply);
        if expected == ErrorCode::EventNotFound {
            // No slot at the home the caller's count names: the master is asked, and has none.
            store = store.answers(&READ_CONFIG, &[code::NOT_FOUND.into()]);
        }
        assert_eq!(buy(&store).unwrap_err().code(), expected, "{reply:?}");
    }
}

#[test]
fn too_early_says_when_to_come_back() {
    let store =
        FakeStore::holding_every_script().answers(&BUY, &[code::TOO_EARLY.into(), 1_500.into()]);
    match buy(&store).unwrap_err() {
        Error::Refused { retry_after_ms, .. } => assert_eq!(retry_after_ms, Some(1_500)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_redis_that_cannot_answer_now_is_unavailable_and_a_script_error_is_a_bug() {
    let busy = FakeStore::holding_every_script().fails(
        &BUY,
        StoreError::new(StoreErrorKind::Unavailable, "LOADING"),
    );
    assert_eq!(buy(&busy).unwrap_err().code(), ErrorCode::Unavailable);
    let broken = FakeStore::holding_every_script().fails(
        &BUY,
        StoreError::new(StoreErrorKind::Failed, "ERR user_script:1"),
    );
    assert_eq!(buy(&broken).unwrap_err().code(), ErrorCode::Internal);
}

#[test]
fn a_reply_longer_than_its_contract_is_a_bug() {
    let store = FakeStore::holding_every_script()
        .answers(&BUY, &[0.into(), 7.into(), 2.into(), 3.into(), 9.into()]);
    assert_eq!(buy(&store).unwrap_err().code(), ErrorCode::Internal);
}

#[test]
fn an_unknown_reply_code_is_a_bug_not_a_refusal() {
    let store = FakeStore::holding_every_script().answers(&BUY, &[99.into()]);
    assert_eq!(buy(&store).unwrap_err().code(), ErrorCode::Internal);
}

fn poll(store: &FakeStore) -> Polled {
    super::poll(&Nodes::one(store), &event(), SHARDS, "u1", 0).unwrap()
}

#[test]
fn a_queued_order_polls_with_its_position_and_wait() {
    let store = FakeStore::holding_every_script().answers(
        &POLL,
        &[
            0.into(),
            "o1".into(),
            "queued".into(),
            30.into(),
            10.into(),
            10.into(),
            1.into(),
            "".into(),
            0.into(),
        ],
    );
    let polled = poll(&store);
    assert_eq!(
        polled.result,
        PollResult::Queued {
            order_id: "o1".into(),
            position: 20,
            estimated_wait_ms: 2_000
        }
    );
    assert!(polled.drain_due);
}

#[test]
fn a_drained_order_polls_with_its_stored_state_and_refund_and_never_drains() {
    let store = FakeStore::holding_every_script().answers(
        &POLL,
        &[
            0.into(),
            "o1".into(),
            "paid".into(),
            30.into(),
            40.into(),
            0.into(),
            1.into(),
            "pending".into(),
            2.into(),
        ],
    );
    let polled = poll(&store);
    assert_eq!(
        polled.result,
        PollResult::Order {
            order_id: "o1".into(),
            state: OrderStatus::Paid,
            refund: Some(Refund {
                state: RefundState::Pending,
                payments: 2
            }),
        }
    );
    assert!(!polled.drain_due);
}

#[test]
fn no_order_polls_as_sold_out_or_none() {
    let sold_out = FakeStore::holding_every_script().answers(&POLL, &[code::NONE.into(), 1.into()]);
    assert_eq!(poll(&sold_out).result, PollResult::SoldOut);
    let none = FakeStore::holding_every_script().answers(&POLL, &[code::NONE.into(), 0.into()]);
    assert_eq!(poll(&none).result, PollResult::None);
}

#[test]
fn a_poll_passes_how_often_a_poll_may_be_elected_to_drain() {
    let store = FakeStore::holding_every_script().answers(&POLL, &[code::NONE.into(), 0.into()]);
    super::poll(&Nodes::one(&store), &event(), SHARDS, "u1", 250).unwrap();
    let home_hash = crate::ids::home_hash(event().as_str(), "u1").to_string();
    assert_eq!(store.calls.borrow()[0].args, ["u1", "250", &home_hash]);
}

const NOW_MS: u64 = 1_764_000_000_000;

fn admit(store: &FakeStore, solution: Option<&Solution>) -> Result<Admission, Error> {
    issue_token(
        &Nodes::one(store),
        &AdmissionRequest {
            event: &event(),
            shards: SHARDS,
            user: "u1",
            client: Some("10.0.0.1"),
            solution,
        },
        b"secret",
        NOW_MS,
    )
}

#[test]
fn a_lottery_registration_is_not_an_admission_token() {
    let store = FakeStore::holding_every_script().answers(&ISSUE_TOKEN, &[code::REGISTERED.into()]);
    assert_eq!(admit(&store, None).unwrap(), Admission::Registered);
}

#[test]
fn an_admitted_user_gets_a_token_of_the_events_admission_version_precheck_accepts() {
    let end_ms = NOW_MS + 60_000;
    let store = FakeStore::holding_every_script().answers(
        &ISSUE_TOKEN,
        &[Reply::Int(code::OK), "0v7".into(), (end_ms as i64).into()],
    );
    let Admission::Admitted { admission_token } = admit(&store, None).unwrap() else {
        panic!("not admitted");
    };
    let terms =
        auth::verify_admission(b"secret", "e1", "u1", &admission_token, NOW_MS / 1000).unwrap();
    assert_eq!(terms.version, "0v7");
    assert_eq!(terms.expires_s, end_ms / 1000 + auth::ADMISSION_GRACE_S);
}

#[test]
fn a_solved_challenge_reaches_the_script_with_its_difficulty_and_a_forged_one_never_does() {
    let challenge = pow::issue(b"secret", "e1", "u1", 6, NOW_MS);
    let solution = Solution {
        nonce: pow::solve(&challenge),
        challenge: challenge.challenge.clone(),
    };
    let store = FakeStore::holding_every_script().answers(&ISSUE_TOKEN, &[code::REGISTERED.into()]);
    admit(&store, Some(&solution)).unwrap();
    {
        let calls = store.calls.borrow();
        let home_hash = crate::ids::home_hash("e1", "u1").to_string();
        assert_eq!(calls[0].args[..3], ["u1", home_hash.as_str(), "6"]);
        assert_eq!(calls[0].args[3], pow::CHALLENGE_TTL_MS.to_string());
        assert!(calls[0].keys[6].ends_with(":rl:addr:10.0.0.1"));
        assert!(calls[0].keys[7].contains(":pow:"));
    }
    let forged = Solution {
        nonce: solution.nonce.clone(),
        challenge: pow::issue(b"other", "e1", "u1", 6, NOW_MS).challenge,
    };
    let store = FakeStore::holding_every_script();
    let e = admit(&store, Some(&forged)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::BadChallenge);
    assert!(store.calls.borrow().is_empty(), "refused before Redis");
}
