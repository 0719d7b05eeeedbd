//! The event configuration's parsing and validation, held to `api/openapi.yaml`.

use super::*;

/// Every message `api/openapi.yaml` lists under an `x-refused-beyond-schema`.
pub(crate) fn refused_beyond_schema() -> Vec<String> {
    let spec = include_str!("../../../../api/openapi.yaml");
    let mut listed = Vec::new();
    let mut lines = spec.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "x-refused-beyond-schema:" {
            let items = lines.clone().map_while(|l| l.trim().strip_prefix("- "));
            listed.extend(items.map(str::to_owned));
        }
    }
    listed
}

fn config() -> EventConfig {
    serde_json::from_str(
        r#"{"sku":"x","unit_amount":1999,"currency":"eur","stock":10,"start_ms":1,"end_ms":2}"#,
    )
    .unwrap()
}

#[test]
fn a_shard_count_outside_the_range_is_invalid() {
    for (shards, valid) in [(0, false), (1, true), (256, true), (257, false)] {
        let mut c = config();
        c.stock = 1_000;
        c.shards = shards;
        assert_eq!(c.validate().is_ok(), valid, "{shards} shards");
    }
}

#[test]
fn a_configuration_reads_back_from_its_hash() {
    let mut c = config();
    c.shards = c.shard_count();
    c.gray_percent = 35;
    c.shadow = vec![Limit::Global, Limit::User]; // the hash keeps them by name
    c.enabled = false;
    c.user_rate = 0.5;
    let mut hash: BTreeMap<String, String> = c
        .fields()
        .into_iter()
        .map(|(n, v)| (n.to_owned(), v))
        .collect();
    hash.insert("version".into(), "v1".into()); // state, not configuration
    assert_eq!(EventConfig::from_fields(&hash), Some(c.clone()));
    hash.remove("gray_percent");
    hash.remove("shadow");
    let old = EventConfig::from_fields(&hash).unwrap();
    assert_eq!((old.gray_percent, old.shadow), (100, vec![]));
    hash.remove("sku");
    assert_eq!(EventConfig::from_fields(&hash), None);
}

#[test]
fn defaults_and_validation() {
    let c = config();
    assert_eq!((c.shards, c.admission_multiplier, c.enabled), (8, 10, true));
    assert!(c.validate().is_ok());
    assert!(
        EventConfig {
            shards: 0,
            ..c.clone()
        }
        .validate()
        .is_err()
    );
    assert!(
        EventConfig {
            end_ms: 1,
            ..c.clone()
        }
        .validate()
        .is_err()
    );
    assert!(
        EventConfig {
            user_rate: f64::NAN,
            ..c.clone()
        }
        .validate()
        .is_err()
    );
    assert!(
        EventConfig {
            buy_rate: 5.0,
            buy_burst: 0,
            ..c
        }
        .validate()
        .is_err()
    );
    assert!(
        serde_json::from_str::<EventConfig>(
            r#"{"sku":"x","unit_amount":1,"currency":"eur","stock":1,"start_ms":1,"end_ms":2,"typo":1}"#
        )
        .is_err()
    );
}

/// `config()` with `field` set to `value`, written into the JSON text as it is given.
fn config_with(field: &str, value: &str) -> Result<EventConfig, serde_json::Error> {
    let mut fields: Vec<String> = [
        ("sku", "\"x\""),
        ("unit_amount", "1999"),
        ("currency", "\"eur\""),
        ("stock", "10"),
        ("start_ms", "1"),
        ("end_ms", "2"),
    ]
    .iter()
    .filter(|(name, _)| *name != field)
    .map(|(name, v)| format!("\"{name}\":{v}"))
    .collect();
    fields.push(format!("\"{field}\":{value}"));
    serde_json::from_str(&format!("{{{}}}", fields.join(",")))
}

#[test]
fn integer_fields_take_any_whole_number_in_range() {
    let c = config_with("buy_burst", "5.0").unwrap();
    assert_eq!(c.buy_burst, 5);
    assert_eq!(
        config_with("buy_burst", "35246040.0").unwrap().buy_burst,
        35_246_040
    );
    assert_eq!(config_with("buy_burst", "5e0").unwrap().buy_burst, 5);
    assert_eq!(config_with("buy_burst", "-0.0").unwrap().buy_burst, 0);
    assert_eq!(
        config_with("user_burst", "4294967295.0")
            .unwrap()
            .user_burst,
        u32::MAX
    );
    assert_eq!(config_with("stock", "1e9").unwrap().stock, 1_000_000_000);
    assert_eq!(
        config_with("end_ms", "18446744073709551615")
            .unwrap()
            .end_ms,
        u64::MAX
    );
    // 2^53 + 2 as a float is exact: the value, not a rounding of it.
    assert_eq!(
        config_with("end_ms", "9007199254740994.0").unwrap().end_ms,
        9_007_199_254_740_994
    );
    for (field, value) in [
        ("buy_burst", "5.5"),
        ("buy_burst", "0.1"),
        ("buy_burst", "-1"),
        ("buy_burst", "-1.0"),
        ("buy_burst", "4294967296"),
        ("buy_burst", "4294967296.0"),
        ("shards", "1e300"),
        ("end_ms", "18446744073709551616"),
        ("end_ms", "1.8446744073709552e19"),
        ("start_ms", "-9223372036854775809"),
        ("stock", "\"5\""),
        ("stock", "true"),
        ("stock", "null"),
    ] {
        let err = config_with(field, value).expect_err(&format!("{field}: {value}"));
        assert!(
            err.to_string()
                .contains("expected a whole number from 0 to"),
            "{field}: {value}: {err}"
        );
    }
}

#[test]
fn switches_take_whole_numbers_null_or_nothing() {
    let s: Switches = serde_json::from_str(r#"{"buy_rate":1,"buy_burst":3.0}"#).unwrap();
    assert_eq!((s.buy_rate, s.buy_burst), (Some(1.0), Some(3)));
    let s: Switches =
        serde_json::from_str(r#"{"end_ms":1767232800000.0,"drain_rate":null}"#).unwrap();
    assert_eq!(
        (s.end_ms, s.drain_rate, s.user_burst),
        (Some(1_767_232_800_000), None, None)
    );
    for bad in [
        r#"{"buy_rate":1,"buy_burst":3.5}"#,
        r#"{"purchase_token_ttl_ms":-1000.0}"#,
        r#"{"drain_rate":4294967296.0}"#,
        r#"{"end_ms":"1"}"#,
    ] {
        assert!(serde_json::from_str::<Switches>(bad).is_err(), "{bad}");
    }
    // The same shapes through serde_json::Value (the tests and the bench build configs so).
    let s: Switches =
        serde_json::from_value(serde_json::json!({ "user_rate": 2, "user_burst": 5.0 })).unwrap();
    assert_eq!(s.user_burst, Some(5));
}

#[test]
fn cross_field_rules_are_refused_with_their_listed_messages() {
    // api/openapi.yaml lists these messages in `x-refused-beyond-schema`.
    let message = |e: Error| match e {
        Error::Invalid { message, .. } => message,
        other => panic!("{other:?}"),
    };
    let c = config();
    assert_eq!(
        message(
            EventConfig {
                start_ms: 2,
                ..c.clone()
            }
            .validate()
            .unwrap_err()
        ),
        "start_ms must be before end_ms"
    );
    assert_eq!(
        message(
            EventConfig {
                user_burst: 0,
                ..c.clone()
            }
            .validate()
            .unwrap_err()
        ),
        "user_burst must be >= 1 when user_rate > 0"
    );
    assert_eq!(
        message(EventConfig { buy_rate: 1.0, ..c }.validate().unwrap_err()),
        "buy_burst must be >= 1 when buy_rate > 0"
    );
    for (switches, want) in [
        (
            r#"{"user_rate":1}"#,
            "set user_rate and user_burst together",
        ),
        (
            r#"{"buy_burst":1,"buy_rate":null}"#,
            "set buy_rate and buy_burst together",
        ),
        (
            r#"{"user_rate":1,"user_burst":0}"#,
            "user_burst must be >= 1 when user_rate > 0",
        ),
        (
            r#"{"buy_rate":1,"buy_burst":0}"#,
            "buy_burst must be >= 1 when buy_rate > 0",
        ),
        (r#"{"enabled":null,"end_ms":null}"#, "nothing to change"),
    ] {
        let s: Switches = serde_json::from_str(switches).unwrap();
        assert_eq!(message(s.fields().unwrap_err()), want, "{switches}");
    }
    let listed = refused_beyond_schema();
    for want in [
        "start_ms must be before end_ms",
        "user_burst must be >= 1 when user_rate > 0",
        "buy_burst must be >= 1 when buy_rate > 0",
        "set user_rate and user_burst together",
        "set buy_rate and buy_burst together",
        "nothing to change",
    ] {
        assert!(
            listed.iter().any(|l| l == want),
            "{want:?} not in {listed:?}"
        );
    }
}

#[test]
fn an_event_has_a_price_in_a_lowercase_iso_currency() {
    let c = config();
    assert_eq!((c.unit_amount, c.currency.as_str()), (1999, "eur"));
    for (unit_amount, currency) in [(0, "eur"), (1, "EUR"), (1, "euro"), (1, "e1r"), (1, "")] {
        let bad = EventConfig {
            unit_amount,
            currency: currency.into(),
            ..c.clone()
        };
        assert_eq!(
            bad.validate().unwrap_err().code(),
            ErrorCode::InvalidConfig,
            "{unit_amount} {currency}"
        );
    }
    for missing in ["unit_amount", "currency"] {
        let mut v = serde_json::to_value(&c).unwrap();
        v.as_object_mut().unwrap().remove(missing);
        assert!(
            serde_json::from_value::<EventConfig>(v).is_err(),
            "{missing}"
        );
    }
}

#[test]
fn times_beyond_what_lua_holds_exactly_are_refused() {
    let late = MAX_TIME_MS + 1;
    for c in [
        EventConfig {
            end_ms: late,
            ..config()
        },
        EventConfig {
            start_ms: late - 10,
            end_ms: late,
            ..config()
        },
        EventConfig {
            admission_opens_ms: late,
            ..config()
        },
    ] {
        match c.validate() {
            Err(Error::Invalid { message, .. }) => {
                assert!(message.contains("at most 253402300799999"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }
    let c = EventConfig {
        end_ms: MAX_TIME_MS,
        ..config()
    };
    assert!(c.validate().is_ok());
    let s: Switches = serde_json::from_str(r#"{"end_ms":9223372036854775807}"#).unwrap();
    assert!(s.fields().is_err());
    let s: Switches = serde_json::from_str(r#"{"admission_opens_ms":9007199254740993}"#).unwrap();
    assert!(s.fields().is_err());
}

#[test]
fn the_admission_gate_has_an_opening_a_difficulty_and_a_per_address_limit() {
    let c = config();
    assert_eq!(
        (
            c.admission_opens_ms,
            c.pow_difficulty,
            c.admission_addr_burst
        ),
        (0, DEFAULT_POW_DIFFICULTY, 200)
    );
    let too_hard = EventConfig {
        pow_difficulty: MAX_POW_DIFFICULTY + 1,
        ..c.clone()
    };
    assert!(too_hard.validate().is_err());
    let s: Switches = serde_json::from_str(r#"{"pow_difficulty":20}"#).unwrap();
    assert_eq!(s.fields().unwrap(), [("pow_difficulty", "20".to_owned())]);
    let s: Switches = serde_json::from_str(r#"{"pow_difficulty":25}"#).unwrap();
    assert!(s.fields().is_err());
    let s: Switches = serde_json::from_str(r#"{"admission_addr_rate":1}"#).unwrap();
    assert!(s.fields().is_err(), "a rate without its burst");
}

#[test]
fn sku_length_is_counted_in_characters() {
    let c = config();
    let sku = |s: String| {
        EventConfig {
            sku: s,
            ..c.clone()
        }
        .validate()
    };
    assert!(sku("é".repeat(128)).is_ok(), "256 bytes, 128 characters");
    assert!(sku("é".repeat(129)).is_err());
    assert!(sku(String::new()).is_err());
}

#[test]
fn event_ids_are_key_safe() {
    assert!(EventId::parse("sale-2026_11").is_ok());
    for bad in ["", "a}b", "a b", "a:b", &"x".repeat(65)] {
        assert!(EventId::parse(bad).is_err(), "{bad}");
    }
}
