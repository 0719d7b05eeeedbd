//! The test secrets and the buyers' tokens minted with them.

/// Test secrets: the shop's JWT key, the admission HMAC key, the operators' token.
pub const JWT_SECRET: &str = "test-jwt-secret";
/// See [`JWT_SECRET`].
pub const ADMISSION_SECRET: &str = "test-admission-secret";
/// See [`JWT_SECRET`].
pub const ADMIN_TOKEN: &str = "test-admin-token";

/// A buyer's bearer token, as the shop's login would mint it.
pub fn jwt_for(user: &str) -> String {
    let claims = seckill_domain::auth::Claims {
        sub: user.into(),
        exp: Some(4_000_000_000),
        nbf: None,
    };
    seckill_domain::auth::sign_jwt(&claims, JWT_SECRET.as_bytes())
}
