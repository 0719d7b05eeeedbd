//! Test-only fault injection: with the `fault-injection` feature (only the tests' copy of the
//! jobs component has it, never a deployed one), the drain dies at an armed point, so the tests
//! can check that a crash there loses and doubles nothing. Without the feature, [`trap`] is
//! nothing at all.

/// Where the drain can be made to die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Between BEGIN and COMMIT of a batch.
    InTransaction,
    /// After the batch's COMMIT, before Redis acknowledges it.
    AfterCommit,
}

#[cfg(feature = "fault-injection")]
static ARMED: std::sync::Mutex<Option<Point>> = std::sync::Mutex::new(None);

/// Arms a point by its name in the `fault_injection` variable (`trap_in_transaction`,
/// `trap_after_commit`); another name arms nothing. An instance serves one request, so the
/// arming lasts that request.
#[cfg(feature = "fault-injection")]
pub fn arm(name: &str) {
    let point = match name {
        "trap_in_transaction" => Some(Point::InTransaction),
        "trap_after_commit" => Some(Point::AfterCommit),
        _ => None,
    };
    *ARMED.lock().expect("no panic holds the lock") = point;
}

/// Dies here when `point` is armed.
#[cfg(feature = "fault-injection")]
pub(crate) fn trap(point: Point) {
    if *ARMED.lock().expect("no panic holds the lock") == Some(point) {
        panic!("fault injection: the drain dies at {point:?}");
    }
}

/// Without the feature: nothing.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) fn trap(_: Point) {}
