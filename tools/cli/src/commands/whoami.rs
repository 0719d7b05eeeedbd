//! `whoami`: the operator and role the token is.

use super::Output;
use super::show;
use crate::api::{Api, Failure};

/// `whoami`: `name (role)`.
pub fn whoami(cli: Output, api: &Api) -> Result<(), Failure> {
    let me = api.get("/admin/whoami")?;
    show(cli, &me, |v| {
        let text = |f: &str| v[f].as_str().unwrap_or("?").to_owned();
        format!("{} ({})", text("operator"), text("role"))
    });
    Ok(())
}
