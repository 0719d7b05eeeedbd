//! Assembles each Lua script (`lua/common.lua` + `lua/<name>.lua`) and computes its SHA1 at build
//! time, so that a request can send EVALSHA without hashing anything.

use std::fmt::Write;

const SCRIPTS: &[&str] = &[
    "issue_token",
    "draw",
    "precheck",
    "buy",
    "poll",
    "upsert_event",
    "warmup",
    "set_fields",
    "deny",
    "status",
];

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
    let common = std::fs::read_to_string(dir.join("common.lua")).expect("lua/common.lua");
    println!("cargo:rerun-if-changed=lua");
    let mut out = String::new();
    for name in SCRIPTS {
        let body = std::fs::read_to_string(dir.join(format!("{name}.lua"))).expect("script");
        let source = format!("{common}\n{body}");
        let sha = sha1_smol::Sha1::from(source.as_bytes())
            .digest()
            .to_string();
        writeln!(
            out,
            "/// `lua/{name}.lua` (with `lua/common.lua`).\npub static {upper}: Script = Script {{ name: {name:?}, source: {source:?}, sha: {sha:?} }};",
            upper = name.to_uppercase()
        )
        .unwrap();
    }
    std::fs::write(
        std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("scripts.rs"),
        out,
    )
    .unwrap();
}
