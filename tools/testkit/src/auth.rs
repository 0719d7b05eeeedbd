//! The test secrets and the buyers' tokens minted with them.

/// Test secrets: the shop's JWT key, the admission HMAC key, the operators' tokens.
pub const JWT_SECRET: &str = "test-jwt-secret";
/// See [`JWT_SECRET`].
pub const ADMISSION_SECRET: &str = "test-admission-secret";
/// The bearer token of [`OPERATOR`], who may read and write.
pub const ADMIN_TOKEN: &str = "test-admin-token";
/// [`OPERATOR`]'s second secret, as during a rotation.
pub const ROTATED_ADMIN_TOKEN: &str = "test-admin-token-rotated";
/// The bearer token of [`VIEWER`], who may only read.
pub const VIEWER_TOKEN: &str = "test-viewer-token";
/// The operator's name, as the audit records it.
pub const OPERATOR: &str = "test-operator";
/// The viewer's name.
pub const VIEWER: &str = "test-viewer";
/// The bearer token of [`SCHEDULER`], who may only run the jobs.
pub const SCHEDULER_TOKEN: &str = "test-scheduler-token";
/// The scheduler's name.
pub const SCHEDULER: &str = "test-ticker";

/// The `operators` variable of the test apps: [`OPERATOR`] with two secrets, [`VIEWER`],
/// [`SCHEDULER`].
pub fn operators() -> String {
    format!(
        "{OPERATOR}:operator:{ADMIN_TOKEN},{OPERATOR}:operator:{ROTATED_ADMIN_TOKEN},\
         {VIEWER}:viewer:{VIEWER_TOKEN},{SCHEDULER}:scheduler:{SCHEDULER_TOKEN}"
    )
}

/// A buyer's bearer token, as the shop's login would mint it.
pub fn jwt_for(user: &str) -> String {
    let claims = seckill_domain::auth::Claims {
        sub: user.into(),
        exp: Some(4_000_000_000),
        nbf: None,
    };
    seckill_domain::auth::sign_jwt(&claims, JWT_SECRET.as_bytes())
}
