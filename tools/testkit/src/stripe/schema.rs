//! The documented parameters of each endpoint the sandbox plays, at the pinned version
//! (2024-06-20: the reference at <https://docs.stripe.com/api?api-version=2024-06-20>, whose
//! parameter lists are the ones stripe-node v16.12.0, the last SDK release pinned to
//! 2024-06-20, generates from Stripe's OpenAPI spec). A request is checked before anything
//! runs, as Stripe does:
//!
//! - a name Stripe does not document → 400 `parameter_unknown`;
//! - a documented name the sandbox does not play → 400 (see [`ApiError::unmodelled`]);
//! - a required one missing → 400 `parameter_missing`; an empty string where a value cannot
//!   be unset → 400 `parameter_invalid_empty`;
//! - a non-integer where an integer goes → 400 `parameter_invalid_integer`; an enum value
//!   off its list → 400 "Invalid …: must be one of …";
//! - metadata beyond <https://docs.stripe.com/api/metadata> (50 keys, keys ≤ 40 characters,
//!   values ≤ 500, no square brackets in keys) → 400.
//!
//! [`check`] returns the parameters typed (integers as numbers, lists as arrays, metadata as
//! an object), which is all the endpoints read.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::form::Node;

/// What one parameter takes.
pub(crate) enum Ty {
    /// A string of at most `max` characters.
    Str(usize),
    /// An `http(s)://` URL (Stripe: "Not a valid URL", `url_invalid`).
    Url,
    /// An email address (Stripe: `email_invalid`).
    Email,
    /// An integer in `min..=max`.
    Int(i64, i64),
    /// `true` / `false`.
    Bool,
    /// One of these values.
    Enum(&'static [&'static str]),
    /// A three-letter code Stripe supports, lowercase.
    Currency,
    /// `metadata[key]=value`, or `metadata=` to clear it.
    Metadata,
    /// A hash of these parameters.
    Obj(&'static [Field]),
    /// An array (`name[0]…`, `name[]`) of at most `max` elements.
    List(&'static Ty, usize),
    /// An integer, or a hash of `gt`, `gte`, `lt`, `lte` integers (list filters).
    Range,
    /// Documented, not played by the sandbox: refused.
    Unmodelled,
}

/// One documented parameter.
pub(crate) struct Field {
    pub name: &'static str,
    pub ty: Ty,
    pub required: bool,
}

const fn opt(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: false,
    }
}

const fn req(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: true,
    }
}

const fn unmodelled(name: &'static str) -> Field {
    opt(name, Ty::Unmodelled)
}

/// Stripe's generic string limit.
const STR: Ty = Ty::Str(5000);

/// Checkout's locales at 2024-06-20 (`SessionCreateParams.Locale`).
pub(crate) const LOCALES: &[&str] = &[
    "auto", "bg", "cs", "da", "de", "el", "en", "en-GB", "es", "es-419", "et", "fi", "fil", "fr",
    "fr-CA", "hr", "hu", "id", "it", "ja", "ko", "lt", "lv", "ms", "mt", "nb", "nl", "pl", "pt",
    "pt-BR", "ro", "ru", "sk", "sl", "sv", "th", "tr", "vi", "zh", "zh-HK", "zh-TW",
];

/// The currencies of <https://docs.stripe.com/currencies> (presentment, card payments).
pub(crate) const CURRENCIES: &[&str] = &[
    "usd", "aed", "afn", "all", "amd", "ang", "aoa", "ars", "aud", "awg", "azn", "bam", "bbd",
    "bdt", "bgn", "bhd", "bif", "bmd", "bnd", "bob", "brl", "bsd", "bwp", "byn", "bzd", "cad",
    "cdf", "chf", "clp", "cny", "cop", "crc", "cve", "czk", "djf", "dkk", "dop", "dzd", "egp",
    "etb", "eur", "fjd", "fkp", "gbp", "gel", "gip", "gmd", "gnf", "gtq", "gyd", "hkd", "hnl",
    "htg", "huf", "idr", "ils", "inr", "isk", "jmd", "jod", "jpy", "kes", "kgs", "khr", "kmf",
    "krw", "kwd", "kyd", "kzt", "lak", "lbp", "lkr", "lrd", "lsl", "mad", "mdl", "mga", "mkd",
    "mmk", "mnt", "mop", "mur", "mvr", "mwk", "mxn", "myr", "mzn", "nad", "ngn", "nio", "nok",
    "npr", "nzd", "omr", "pab", "pen", "pgk", "php", "pkr", "pln", "pyg", "qar", "ron", "rsd",
    "rub", "rwf", "sar", "sbd", "scr", "sek", "sgd", "shp", "sle", "sos", "srd", "std", "szl",
    "thb", "tjs", "tnd", "top", "try", "ttd", "twd", "tzs", "uah", "ugx", "uyu", "uzs", "vnd",
    "vuv", "wst", "xaf", "xcd", "xof", "xpf", "yer", "zar", "zmw",
];

/// Zero-decimal currencies (<https://docs.stripe.com/currencies#zero-decimal>): amounts are
/// whole units.
pub(crate) const ZERO_DECIMAL: &[&str] = &[
    "bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv",
    "xaf", "xof", "xpf",
];

const EXPAND: Field = opt("expand", Ty::List(&STR, 100));

// POST /v1/checkout/sessions — https://docs.stripe.com/api/checkout/sessions/create

const PRODUCT_DATA: &[Field] = &[
    req("name", STR),
    opt("description", STR),
    opt("images", Ty::List(&Ty::Url, 8)),
    opt("metadata", Ty::Metadata),
    opt("tax_code", STR),
];

const RECURRING: &[Field] = &[
    req("interval", Ty::Enum(&["day", "month", "week", "year"])),
    opt("interval_count", Ty::Int(1, 1095)),
];

const PRICE_DATA: &[Field] = &[
    req("currency", Ty::Currency),
    opt("product", STR),
    opt("product_data", Ty::Obj(PRODUCT_DATA)),
    // In `payment` mode a recurring price is refused by the endpoint with Stripe's message.
    opt("recurring", Ty::Obj(RECURRING)),
    opt(
        "tax_behavior",
        Ty::Enum(&["exclusive", "inclusive", "unspecified"]),
    ),
    opt("unit_amount", Ty::Int(0, 99_999_999)),
    unmodelled("unit_amount_decimal"),
];

const LINE_ITEM: &[Field] = &[
    unmodelled("adjustable_quantity"),
    unmodelled("dynamic_tax_rates"),
    opt("price", STR),
    opt("price_data", Ty::Obj(PRICE_DATA)),
    opt("quantity", Ty::Int(1, 999_999)),
    unmodelled("tax_rates"),
];

const PAYMENT_INTENT_DATA: &[Field] = &[
    unmodelled("application_fee_amount"),
    unmodelled("capture_method"),
    opt("description", Ty::Str(1000)),
    opt("metadata", Ty::Metadata),
    unmodelled("on_behalf_of"),
    opt("receipt_email", Ty::Email),
    unmodelled("setup_future_usage"),
    unmodelled("shipping"),
    opt("statement_descriptor", Ty::Str(22)),
    opt("statement_descriptor_suffix", Ty::Str(22)),
    unmodelled("transfer_data"),
    unmodelled("transfer_group"),
];

const SESSION_LINE_ITEMS: Ty = Ty::Obj(LINE_ITEM);

/// `SessionCreateParams` at 2024-06-20, every documented top-level name.
pub(crate) const CREATE_SESSION: &[Field] = &[
    unmodelled("after_expiration"),
    unmodelled("allow_promotion_codes"),
    unmodelled("automatic_tax"),
    unmodelled("billing_address_collection"),
    opt("cancel_url", Ty::Url),
    opt("client_reference_id", Ty::Str(200)),
    unmodelled("consent_collection"),
    opt("currency", Ty::Currency),
    unmodelled("custom_fields"),
    unmodelled("custom_text"),
    unmodelled("customer"),
    unmodelled("customer_creation"),
    opt("customer_email", Ty::Email),
    unmodelled("customer_update"),
    unmodelled("discounts"),
    EXPAND,
    opt("expires_at", Ty::Int(0, i64::MAX)),
    unmodelled("invoice_creation"),
    opt("line_items", Ty::List(&SESSION_LINE_ITEMS, 100)),
    opt("locale", Ty::Enum(LOCALES)),
    opt("metadata", Ty::Metadata),
    req("mode", Ty::Enum(&["payment", "setup", "subscription"])),
    opt("payment_intent_data", Ty::Obj(PAYMENT_INTENT_DATA)),
    unmodelled("payment_method_collection"),
    unmodelled("payment_method_configuration"),
    unmodelled("payment_method_data"),
    unmodelled("payment_method_options"),
    opt("payment_method_types", Ty::List(&STR, 50)),
    unmodelled("phone_number_collection"),
    unmodelled("redirect_on_completion"),
    unmodelled("return_url"),
    unmodelled("saved_payment_method_options"),
    unmodelled("setup_intent_data"),
    unmodelled("shipping_address_collection"),
    unmodelled("shipping_options"),
    opt("submit_type", Ty::Enum(&["auto", "book", "donate", "pay"])),
    unmodelled("subscription_data"),
    opt("success_url", Ty::Url),
    unmodelled("tax_id_collection"),
    opt("ui_mode", Ty::Enum(&["embedded", "hosted"])),
];

/// `GET /v1/checkout/sessions/:id`, `GET /v1/payment_intents/:id` (its `client_secret` is a
/// publishable-key affair), `GET /v1/refunds/:id`, `GET /v1/events/:id`.
pub(crate) const RETRIEVE: &[Field] = &[EXPAND];

/// `POST /v1/checkout/sessions/:id/expire` takes no parameters but `expand`.
pub(crate) const EXPIRE_SESSION: &[Field] = &[EXPAND];

// POST /v1/refunds — https://docs.stripe.com/api/refunds/create

/// `RefundCreateParams` at 2024-06-20.
pub(crate) const CREATE_REFUND: &[Field] = &[
    opt("amount", Ty::Int(1, 99_999_999)),
    opt("charge", STR),
    unmodelled("currency"),
    unmodelled("customer"),
    EXPAND,
    unmodelled("instructions_email"),
    opt("metadata", Ty::Metadata),
    unmodelled("origin"),
    opt("payment_intent", STR),
    opt(
        "reason",
        Ty::Enum(&["duplicate", "fraudulent", "requested_by_customer"]),
    ),
    unmodelled("refund_application_fee"),
    unmodelled("reverse_transfer"),
];

// GET /v1/events — https://docs.stripe.com/api/events/list

/// `EventListParams` at 2024-06-20 (with the pagination ones,
/// <https://docs.stripe.com/api/pagination>).
pub(crate) const LIST_EVENTS: &[Field] = &[
    opt("created", Ty::Range),
    opt("delivery_success", Ty::Bool),
    opt("ending_before", STR),
    EXPAND,
    opt("limit", Ty::Int(1, 100)),
    opt("starting_after", STR),
    opt("type", STR),
    opt("types", Ty::List(&STR, 20)),
];

/// Checks `params` against `fields`: the typed parameters, or the error Stripe answers.
pub(crate) fn check(params: &BTreeMap<String, Node>, fields: &[Field]) -> Result<Value, ApiError> {
    check_obj(params, fields, "")
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}[{name}]")
    }
}

fn check_obj(
    params: &BTreeMap<String, Node>,
    fields: &[Field],
    prefix: &str,
) -> Result<Value, ApiError> {
    let mut out = Map::new();
    for (name, node) in params {
        let path = join(prefix, name);
        let Some(field) = fields.iter().find(|f| f.name == name) else {
            return Err(ApiError::unknown(&path));
        };
        let value = check_value(node, &field.ty, &path, field.required)?;
        out.insert(name.clone(), value);
    }
    for field in fields.iter().filter(|f| f.required) {
        if !params.contains_key(field.name) {
            return Err(ApiError::missing(&join(prefix, field.name)));
        }
    }
    Ok(Value::Object(out))
}

fn empty(path: &str) -> ApiError {
    ApiError::invalid(format!(
        "You passed an empty string for '{path}'. We assume empty values are an attempt to \
         unset a parameter; however '{path}' cannot be unset. You should remove '{path}' from \
         your request or supply a non-empty value."
    ))
    .with_code("parameter_invalid_empty")
    .with_param(path)
}

fn leaf<'a>(node: &'a Node, path: &str, what: &str) -> Result<&'a str, ApiError> {
    match node {
        Node::Leaf(s) => Ok(s),
        Node::Map(_) => Err(ApiError::invalid(format!("Invalid {what}")).with_param(path)),
    }
}

fn check_value(node: &Node, ty: &Ty, path: &str, required: bool) -> Result<Value, ApiError> {
    // An empty string unsets an optional scalar; a required one cannot be unset.
    if let Node::Leaf(s) = node
        && s.is_empty()
        && !matches!(ty, Ty::Metadata | Ty::List(..) | Ty::Unmodelled)
    {
        return if required {
            Err(empty(path))
        } else {
            Ok(Value::Null)
        };
    }
    match ty {
        Ty::Unmodelled => Err(ApiError::unmodelled(path)),
        Ty::Str(max) => {
            let s = leaf(node, path, "string")?;
            if s.chars().count() > *max {
                return Err(ApiError::invalid(format!(
                    "Invalid string: {}...; must be at most {max} characters",
                    s.chars().take(10).collect::<String>()
                ))
                .with_param(path));
            }
            Ok(json!(s))
        }
        Ty::Url => {
            let s = leaf(node, path, "string")?;
            let ok = s.len() <= 5000
                && url::Url::parse(s).is_ok_and(|u| {
                    matches!(u.scheme(), "http" | "https") && u.host_str().is_some()
                });
            if !ok {
                return Err(ApiError::invalid("Not a valid URL")
                    .with_code("url_invalid")
                    .with_param(path));
            }
            Ok(json!(s))
        }
        Ty::Email => {
            let s = leaf(node, path, "string")?;
            let ok = s.len() <= 800
                && s.split_once('@').is_some_and(|(user, host)| {
                    !user.is_empty() && host.contains('.') && !host.contains('@')
                })
                && !s.contains(char::is_whitespace);
            if !ok {
                return Err(ApiError::invalid(format!("Invalid email address: {s}"))
                    .with_code("email_invalid")
                    .with_param(path));
            }
            Ok(json!(s))
        }
        Ty::Int(min, max) => {
            let s = leaf(node, path, "integer")?;
            let n: i64 = s.parse().map_err(|_| {
                ApiError::invalid(format!("Invalid integer: {s}"))
                    .with_code("parameter_invalid_integer")
                    .with_param(path)
            })?;
            if n < *min {
                return Err(ApiError::invalid(format!(
                    "This value must be greater than or equal to {min}."
                ))
                .with_param(path));
            }
            if n > *max {
                return Err(ApiError::invalid(format!(
                    "This value must be less than or equal to {max}."
                ))
                .with_param(path));
            }
            Ok(json!(n))
        }
        Ty::Bool => match leaf(node, path, "boolean")? {
            "true" => Ok(json!(true)),
            "false" => Ok(json!(false)),
            s => Err(ApiError::invalid(format!("Invalid boolean: {s}")).with_param(path)),
        },
        Ty::Enum(values) => {
            let s = leaf(node, path, "string")?;
            if values.contains(&s) {
                return Ok(json!(s));
            }
            let name = path
                .rsplit('[')
                .next()
                .unwrap_or(path)
                .trim_end_matches(']');
            let list = match values.split_last() {
                Some((last, rest)) if !rest.is_empty() => {
                    format!("{}, or {last}", rest.join(", "))
                }
                _ => values.join(", "),
            };
            Err(
                ApiError::invalid(format!("Invalid {name}: must be one of {list}"))
                    .with_param(path),
            )
        }
        Ty::Currency => {
            let s = leaf(node, path, "currency")?.to_ascii_lowercase();
            if CURRENCIES.contains(&s.as_str()) {
                Ok(json!(s))
            } else {
                Err(ApiError::invalid(format!(
                    "Invalid currency: {s}. Stripe currently supports these currencies: {}",
                    CURRENCIES.join(", ")
                ))
                .with_param(path))
            }
        }
        Ty::Metadata => check_metadata(node, path),
        Ty::Obj(fields) => match node {
            Node::Map(m) => check_obj(m, fields, path),
            Node::Leaf(_) => Err(ApiError::invalid("Invalid hash").with_param(path)),
        },
        Ty::List(of, max) => {
            let items = match node {
                Node::Leaf(s) if s.is_empty() => return Ok(json!([])),
                Node::Leaf(_) => return Err(ApiError::invalid("Invalid array").with_param(path)),
                Node::Map(m) => m,
            };
            let mut indexed = Vec::with_capacity(items.len());
            for (k, v) in items {
                let Ok(i) = k.parse::<usize>() else {
                    return Err(ApiError::invalid("Invalid array").with_param(path));
                };
                indexed.push((i, v));
            }
            indexed.sort_by_key(|(i, _)| *i);
            if indexed.len() > *max {
                return Err(ApiError::invalid(format!(
                    "Invalid array: must have at most {max} elements"
                ))
                .with_param(path));
            }
            let mut out = Vec::with_capacity(indexed.len());
            for (pos, (_, v)) in indexed.into_iter().enumerate() {
                out.push(check_value(v, of, &format!("{path}[{pos}]"), true)?);
            }
            Ok(Value::Array(out))
        }
        Ty::Range => match node {
            Node::Leaf(_) => check_value(node, &Ty::Int(0, i64::MAX), path, true),
            Node::Map(m) => {
                const BOUND: Ty = Ty::Int(0, i64::MAX);
                const BOUNDS: &[Field] = &[
                    opt("gt", BOUND),
                    opt("gte", BOUND),
                    opt("lt", BOUND),
                    opt("lte", BOUND),
                ];
                check_obj(m, BOUNDS, path)
            }
        },
    }
}

/// <https://docs.stripe.com/api/metadata>: "up to 50 keys, with key names up to 40 characters
/// long and values up to 500 characters long … you can't use square brackets ([ and ]) in
/// keys"; posting an empty value to `metadata` unsets it all.
fn check_metadata(node: &Node, path: &str) -> Result<Value, ApiError> {
    let map = match node {
        Node::Leaf(s) if s.is_empty() => return Ok(json!({})),
        Node::Leaf(_) => return Err(ApiError::invalid("Invalid hash").with_param(path)),
        Node::Map(m) => m,
    };
    if map.len() > 50 {
        return Err(
            ApiError::invalid("Invalid metadata: metadata cannot have more than 50 keys")
                .with_param(path),
        );
    }
    let mut out = Map::new();
    for (k, v) in map {
        let key_path = format!("{path}[{k}]");
        let Node::Leaf(v) = v else {
            return Err(
                ApiError::invalid("Metadata keys can't contain square brackets ([ and ])")
                    .with_param(key_path),
            );
        };
        if k.chars().count() > 40 {
            return Err(ApiError::invalid(format!(
                "Invalid metadata: metadata keys must be at most 40 characters; {k} is too long"
            ))
            .with_param(key_path));
        }
        if v.chars().count() > 500 {
            return Err(ApiError::invalid(
                "Invalid metadata: metadata values must be at most 500 characters",
            )
            .with_param(key_path));
        }
        // An empty value unsets that key.
        if !v.is_empty() {
            out.insert(k.clone(), json!(v));
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::super::form::parse;
    use super::*;

    fn run(body: &str, fields: &[Field]) -> Result<Value, ApiError> {
        check(&parse(body.as_bytes()).unwrap(), fields)
    }

    const SESSION: &str = "mode=payment&success_url=https%3A%2F%2Fshop.test%2Fok\
        &line_items[0][price_data][currency]=EUR&line_items[0][price_data][unit_amount]=1999\
        &line_items[0][price_data][product_data][name]=Phone&line_items[0][quantity]=1";

    #[test]
    fn types_a_good_session() {
        let v = run(SESSION, CREATE_SESSION).unwrap();
        assert_eq!(v["line_items"][0]["price_data"]["unit_amount"], 1999);
        assert_eq!(v["line_items"][0]["price_data"]["currency"], "eur");
    }

    #[test]
    fn names_the_offending_parameter() {
        let e = run(&format!("{SESSION}&line_items[0][foo]=1"), CREATE_SESSION).unwrap_err();
        assert_eq!(e.code, Some("parameter_unknown"));
        assert_eq!(e.param.as_deref(), Some("line_items[0][foo]"));

        let e = run("success_url=https%3A%2F%2Fa.b", CREATE_SESSION).unwrap_err();
        assert_eq!(e.code, Some("parameter_missing"));
        assert_eq!(e.param.as_deref(), Some("mode"));

        let e = run(
            &SESSION.replace("[quantity]=1", "[quantity]=two"),
            CREATE_SESSION,
        )
        .unwrap_err();
        assert_eq!(e.code, Some("parameter_invalid_integer"));

        let e = run(&format!("{SESSION}&locale=xx"), CREATE_SESSION).unwrap_err();
        assert!(
            e.message
                .starts_with("Invalid locale: must be one of auto, bg")
        );

        let e = run(
            &format!("{SESSION}&automatic_tax[enabled]=true"),
            CREATE_SESSION,
        )
        .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("automatic_tax"));
        assert_eq!(e.code, None);
    }

    #[test]
    fn metadata_limits() {
        let long_key = "k".repeat(41);
        let e = run(&format!("metadata[{long_key}]=v"), CREATE_REFUND).unwrap_err();
        assert!(e.message.contains("at most 40 characters"));
        let v = run("metadata[a]=1&metadata[b]=", CREATE_REFUND).unwrap();
        assert_eq!(v["metadata"], json!({"a": "1"}));
    }
}
