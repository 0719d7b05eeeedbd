//! How the app reaches Redis in a test: Redis's protocol, or the REST facades
//! (`SECKILL_TRANSPORT=rest`).

use anyhow::Result;

use crate::rest_facade::RestFacade;
use crate::tls::TestCa;

/// Whether the tests reach Redis through the REST facade (`SECKILL_TRANSPORT=rest`, one of the
/// suite's [`switches`](crate::suite_runs::switches)).
pub fn rest_transport() -> bool {
    crate::suite_runs::switches().rest
}

/// Puts a REST facade (certificate from a new CA) in front of every `redis://` node of `vars`
/// and points `redis_url` and `redis_origin` at them; returns the facades and their CA.
pub(crate) async fn over_rest(vars: &mut [(&str, String)]) -> Result<(Vec<RestFacade>, TestCa)> {
    let ca = TestCa::new()?;
    let mut facades = Vec::new();
    for (k, v) in vars.iter_mut() {
        if *k != "redis_url" || !v.starts_with("redis://") {
            continue;
        }
        let mut urls = Vec::new();
        for (i, node) in v.split(',').enumerate() {
            let facade = RestFacade::start(node.trim(), &ca, &format!("token{i}")).await?;
            urls.push(facade.url());
            facades.push(facade);
        }
        *v = urls.join(",");
    }
    for (k, v) in vars.iter_mut() {
        if *k == "redis_origin" && !facades.is_empty() {
            *v = match facades.as_slice() {
                [one] => one.origin(),
                _ => "https://localhost:*".into(),
            };
        }
    }
    Ok((facades, ca))
}
