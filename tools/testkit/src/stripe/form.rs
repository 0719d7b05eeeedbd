//! Stripe's request encoding: `application/x-www-form-urlencoded` bodies (and query strings)
//! whose names use bracket notation for nesting — `metadata[payment_id]=…`,
//! `line_items[0][price_data][currency]=eur`, `expand[]=payment_intent` (an empty index
//! appends). The reference shows every request that way (`curl -d "line_items[0][price]=…"`,
//! <https://docs.stripe.com/api/checkout/sessions/create>) and its SDKs encode nested
//! parameters the same way. This module only builds the tree; [`super::schema`] checks it
//! against the documented parameters.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One parameter: a value, or a hash of parameters (arrays are hashes keyed `0`, `1`, …).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// A scalar, as sent (every form value is a string).
    Leaf(String),
    /// `name[key]…`: the keys in sorted order (indexes sort as numbers where it matters).
    Map(BTreeMap<String, Node>),
}

/// A name/value pair whose shape clashes with an earlier one (`a=1&a[b]=2`): Stripe answers
/// "Invalid hash" for it; the parser reports the name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Clash(pub String);

/// Splits `line_items[0][price_data][currency]` into its segments; a name whose brackets do
/// not pair up stays one segment (Stripe then calls it an unknown parameter).
fn segments(name: &str) -> Vec<String> {
    let Some(open) = name.find('[') else {
        return vec![name.to_owned()];
    };
    let mut out = vec![name[..open].to_owned()];
    let mut rest = &name[open..];
    while !rest.is_empty() {
        let Some(inner) = rest.strip_prefix('[') else {
            return vec![name.to_owned()];
        };
        let Some(close) = inner.find(']') else {
            return vec![name.to_owned()];
        };
        out.push(inner[..close].to_owned());
        rest = &inner[close + 1..];
    }
    out
}

/// Parses a form body or a query string into its parameter tree.
pub(crate) fn parse(encoded: &[u8]) -> Result<BTreeMap<String, Node>, Clash> {
    let mut root: BTreeMap<String, Node> = BTreeMap::new();
    for (name, value) in url::form_urlencoded::parse(encoded) {
        let segs = segments(&name);
        insert(&mut root, &segs, value.into_owned(), &name)?;
    }
    Ok(root)
}

fn insert(
    map: &mut BTreeMap<String, Node>,
    segs: &[String],
    value: String,
    name: &str,
) -> Result<(), Clash> {
    let (first, rest) = segs.split_first().expect("at least one segment");
    // `expand[]=a&expand[]=b`: an empty index appends at the next free position.
    let key = if first.is_empty() {
        map.len().to_string()
    } else {
        first.clone()
    };
    if rest.is_empty() {
        if matches!(map.get(&key), Some(Node::Map(_))) {
            return Err(Clash(name.to_owned()));
        }
        map.insert(key, Node::Leaf(value));
        return Ok(());
    }
    let child = map.entry(key).or_insert_with(|| Node::Map(BTreeMap::new()));
    match child {
        Node::Map(inner) => insert(inner, rest, value, name),
        Node::Leaf(_) => Err(Clash(name.to_owned())),
    }
}

/// The tree as JSON (every leaf a string), for the call log and to compare the parameters of
/// two requests sent with one idempotency key.
pub(crate) fn to_json(map: &BTreeMap<String, Node>) -> Value {
    let mut out = Map::new();
    for (k, v) in map {
        out.insert(
            k.clone(),
            match v {
                Node::Leaf(s) => Value::String(s.clone()),
                Node::Map(m) => to_json(m),
            },
        );
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nests_brackets_and_appends_empty_indexes() {
        let tree = parse(
            b"mode=payment&line_items[0][price_data][currency]=eur&line_items[0][quantity]=2\
              &metadata[payment_id]=p%5B1%5D&expand[]=a&expand[]=b",
        )
        .unwrap();
        let json = to_json(&tree);
        assert_eq!(json["line_items"]["0"]["price_data"]["currency"], "eur");
        assert_eq!(json["line_items"]["0"]["quantity"], "2");
        assert_eq!(json["metadata"]["payment_id"], "p[1]");
        assert_eq!(json["expand"]["0"], "a");
        assert_eq!(json["expand"]["1"], "b");
    }

    #[test]
    fn a_value_and_a_hash_under_one_name_clash() {
        assert_eq!(parse(b"a=1&a[b]=2"), Err(Clash("a[b]".into())));
        assert_eq!(parse(b"a[b]=2&a=1"), Err(Clash("a".into())));
    }

    #[test]
    fn unpaired_brackets_stay_one_name() {
        let tree = parse(b"a[b=1").unwrap();
        assert!(tree.contains_key("a[b"));
    }
}
