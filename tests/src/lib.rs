//! Tests only: the end-to-end suites are `tests/*.rs`. What they start and drive (servers, the
//! host, a REST facade, a CA) is the test kit, `tools/testkit`, which the tooling uses too.
