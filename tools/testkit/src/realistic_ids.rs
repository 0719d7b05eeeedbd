//! Test data: user ids as real systems make them, a million of each kind, reproducible.

/// The kinds of user ids [`realistic_ids`] makes.
pub const ID_KINDS: [&str; 3] = ["sequential", "uuid", "email"];

/// A reproducible million user ids of one of [`ID_KINDS`] (sequential numbers, random UUIDs,
/// emails made of common names): what the home-shard spread is checked over, by the unit test
/// below and by the bench's capacity table.
pub fn realistic_ids(kind: &str) -> impl Iterator<Item = String> + '_ {
    // SplitMix64: a reproducible stream for the UUIDs' random bits and the emails' names.
    let mut state = 0x5eed_u64;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    const NAMES: [&str; 8] = ["li", "wang", "zhang", "liu", "chen", "yang", "anna", "john"];
    (0..1_000_000u64).map(move |i| match kind {
        "sequential" => (10_000_000 + i).to_string(),
        "uuid" => {
            let (a, b) = (next(), next());
            format!(
                "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
                a >> 32,
                (a >> 16) & 0xffff,
                a & 0xfff,
                0x8000 | (b >> 48) & 0x3fff,
                b & 0xffff_ffff_ffff
            )
        }
        _ => {
            let r = next();
            let (first, last) = (NAMES[(r % 8) as usize], NAMES[((r >> 8) % 8) as usize]);
            format!("{first}.{last}{}@mail{}.example", i % 10_000, (r >> 16) % 5)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use seckill_domain::ids::home_shard;

    /// A million user ids as real systems make them: sequential numbers, UUIDs (v4), emails.
    /// The spread the design warns about (one node at 100 % while the others idle): checked
    /// over a million ids of each kind, for the shard counts operators use. Every shard must be
    /// within 4.5 standard deviations of its fair share, as a uniformly random assignment is
    /// (printed: `cargo nextest run -p seckill-testkit home_shards --no-capture`).
    #[test]
    fn home_shards_spread_evenly_over_a_million_realistic_ids() {
        for kind in ID_KINDS {
            for shards in [8u32, 32, 256] {
                let mut counts = vec![0u64; shards as usize];
                for user in realistic_ids(kind) {
                    counts[home_shard("hot-item", &user, shards) as usize] += 1;
                }
                let fair = 1_000_000.0 / f64::from(shards);
                let sigma = (fair * (1.0 - 1.0 / f64::from(shards))).sqrt();
                let bound = 4.5 * sigma / fair;
                let worst = *counts.iter().max().unwrap() as f64 / fair;
                let least = *counts.iter().min().unwrap() as f64 / fair;
                println!(
                    "{kind:>10} ids, {shards:>3} shards: worst shard {worst:.3} x its fair share, least {least:.3} x"
                );
                assert!(
                    worst <= 1.0 + bound && least >= 1.0 - bound,
                    "{kind}, {shards} shards, bound ±{bound:.3}: {counts:?}"
                );
            }
        }
    }
}
