pub struct PgConnection;
