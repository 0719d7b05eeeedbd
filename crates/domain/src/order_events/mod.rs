//! Order events for the shop's systems: every state change of an order (`order.landed`,
//! `order.paid`, `order.expired`, `payment.refunded`) is written to the `order_events` outbox in
//! the change's own transaction (`migrations/0012_order_events.sql`: triggers, so no write path
//! can leave one out), and the deliver-events job sends each to every endpoint the operators
//! registered ([`endpoints`]), signed as the Standard Webhooks specification says
//! ([`signature`]), at least once and in order ([`deliver`]).

pub mod deliver;
pub mod endpoints;
pub mod signature;

use std::fmt;

/// What happened to an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// In Postgres, waiting for payment.
    Landed,
    /// Paid.
    Paid,
    /// Not paid in time: its unit went back.
    Expired,
    /// A payment that bought nothing (late, twice, the wrong amount) was paid back.
    Refunded,
}

impl EventType {
    /// Every type, as the spec lists them.
    pub const ALL: [EventType; 4] = [
        EventType::Landed,
        EventType::Paid,
        EventType::Expired,
        EventType::Refunded,
    ];

    /// Its name: the payload's `type` (and the outbox's `CHECK`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Landed => "order.landed",
            EventType::Paid => "order.paid",
            EventType::Expired => "order.expired",
            EventType::Refunded => "payment.refunded",
        }
    }

    /// The type named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        EventType::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

impl serde::Serialize for EventType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names the migration's triggers write and its `CHECK` allows are these.
    #[test]
    fn the_outbox_knows_every_type() {
        let migration = include_str!("../../../../migrations/0012_order_events.sql");
        for t in EventType::ALL {
            assert!(migration.contains(&format!("'{t}'")), "{t}");
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
    }
}
