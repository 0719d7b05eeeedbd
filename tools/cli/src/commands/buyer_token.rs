//! `buyer-token USER`: a buyer's sign-in token (an HS256 JWT, as the shop's login mints them)
//! signed here with the deployment's `jwt_secret`, for trying a sale by hand or from a script
//! against a local or test stack. Whoever holds that key can be any buyer: it never leaves this
//! machine, and no request to the server is made.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use seckill_domain::auth::{self, Claims};
use serde_json::json;

use super::Output;
use super::show;
use crate::api::Failure;

/// Where `scripts/up.sh` keeps the local stack's secrets (relative to the checkout).
pub const LOCAL_SECRETS: &str = ".data/secrets.env";
/// The variable holding the key, in the environment or in a secrets file.
pub const JWT_SECRET_VAR: &str = "SPIN_VARIABLE_JWT_SECRET";
/// The longest a minted token may live.
pub const MAX_VALID_FOR: Duration = Duration::from_secs(24 * 3600);

/// `buyer-token`: prints the token (with `--json`, as the demo login answers it).
pub fn buyer_token(
    cli: Output,
    user: &str,
    valid_for: Duration,
    secrets: Option<&Path>,
) -> Result<(), Failure> {
    if auth::check_user_id(user).is_err() {
        return Err(Failure::Usage(format!(
            "{user:?} is not a user id: 1-128 printable ASCII characters without spaces"
        )));
    }
    if valid_for.is_zero() || valid_for > MAX_VALID_FOR {
        return Err(Failure::Usage(
            "--valid-for is from 1s to 24h: a buyer's token must expire".into(),
        ));
    }
    let key = jwt_secret(secrets, std::env::var(JWT_SECRET_VAR).ok())?;
    let now_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| Failure::Unexpected(format!("the clock: {e}")))?
        .as_secs();
    let exp = now_s + valid_for.as_secs().max(1);
    let claims = Claims {
        sub: user.to_owned(),
        exp: Some(exp),
        nbf: None,
    };
    let token = auth::sign_jwt(&claims, key.as_bytes());
    let minted = json!({ "token": token, "user": user, "expires_at_ms": exp * 1000 });
    show(cli, &minted, |v| {
        v["token"].as_str().unwrap_or("").to_owned()
    });
    Ok(())
}

/// The key: from `secrets` when given, else from the environment's `SPIN_VARIABLE_JWT_SECRET`,
/// else from the local stack's `.data/secrets.env`.
fn jwt_secret(secrets: Option<&Path>, from_env: Option<String>) -> Result<String, Failure> {
    let file = match (secrets, from_env) {
        (Some(file), _) => file.to_owned(),
        (None, Some(key)) if !key.is_empty() => return Ok(key),
        (None, _) => PathBuf::from(LOCAL_SECRETS),
    };
    let text = std::fs::read_to_string(&file).map_err(|e| {
        Failure::Usage(format!(
            "no JWT key: {JWT_SECRET_VAR} is not set and {} cannot be read ({e}); \
             scripts/up.sh writes it, or pass --secrets FILE",
            file.display()
        ))
    })?;
    secret_in(&text)
        .ok_or_else(|| Failure::Usage(format!("{} has no {JWT_SECRET_VAR}=… line", file.display())))
}

/// The value of `SPIN_VARIABLE_JWT_SECRET=…` in an env file, read as dotenvy reads one (the
/// host reads the same files with it: `export`, quotes, comments).
fn secret_in(text: &str) -> Option<String> {
    dotenvy::from_read_iter(text.as_bytes())
        .filter_map(Result::ok)
        .find(|(name, _)| name == JWT_SECRET_VAR)
        .map(|(_, value)| value)
        .filter(|value| !value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_read_from_an_env_file() {
        let file = "SPIN_VARIABLE_ADMISSION_SECRET=aa\n\
                    SPIN_VARIABLE_JWT_SECRET=0123abcd\n\
                    SPIN_VARIABLE_OPERATORS=local:operator:ff\n";
        assert_eq!(secret_in(file).as_deref(), Some("0123abcd"));
        assert_eq!(
            secret_in("export SPIN_VARIABLE_JWT_SECRET='k e y'").as_deref(),
            Some("k e y")
        );
        assert_eq!(secret_in("SPIN_VARIABLE_JWT_SECRET=\n"), None);
        assert_eq!(secret_in("SPIN_VARIABLE_JWT_SECRET_OLD=x\n"), None);
    }

    #[test]
    fn a_file_given_wins_over_the_environment() {
        let dir = std::env::temp_dir().join(format!("buyer-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("secrets.env");
        std::fs::write(&file, "SPIN_VARIABLE_JWT_SECRET=from-file\n").unwrap();
        let env = Some("from-env".to_owned());
        assert_eq!(jwt_secret(Some(&file), env.clone()).unwrap(), "from-file");
        assert_eq!(jwt_secret(None, env).unwrap(), "from-env");
        let missing = jwt_secret(Some(&dir.join("none.env")), None).unwrap_err();
        assert_eq!(missing.exit_code(), 2, "{missing}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
