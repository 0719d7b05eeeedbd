//! Assembles each Lua script (the reply codes, `lua/common.lua`, `lua/<name>.lua`) and computes
//! its SHA1 at build time, so that a request sends EVALSHA without hashing anything. The reply
//! codes come from one table, `src/scripts/codes.in`, written out for Lua and for Rust.

use std::fmt::Write;
use std::path::Path;

/// (name, value, meaning) of every reply code.
const CODES: &[(&str, i64, &str)] = include!("src/scripts/codes.in");

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("../../shared/lua");
    println!("cargo:rerun-if-changed=../../shared/lua");
    println!("cargo:rerun-if-changed=src/scripts/codes.in");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());

    let mut lua_codes =
        String::from("-- Reply codes (generated from crates/domain/src/scripts/codes.in).\n");
    let mut rust_codes = String::new();
    for (name, value, meaning) in CODES {
        writeln!(lua_codes, "local {name} = {value}").unwrap();
        writeln!(
            rust_codes,
            "/// {meaning}\npub const {name}: i64 = {value};"
        )
        .unwrap();
    }
    std::fs::write(out.join("codes.rs"), rust_codes).unwrap();

    let common = std::fs::read_to_string(dir.join("common.lua")).expect("lua/common.lua");
    // Every `lua/*.lua` but `common.lua` is a script, named after its file.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("lua/")
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .into_string()
                .ok()?
                .strip_suffix(".lua")
                .map(str::to_owned)
        })
        .filter(|n| n != "common")
        .collect();
    names.sort();
    let mut scripts = String::new();
    for name in &names {
        let body = std::fs::read_to_string(dir.join(format!("{name}.lua"))).expect("script");
        let source = format!("{lua_codes}{common}\n{body}");
        let sha = sha1_smol::Sha1::from(source.as_bytes())
            .digest()
            .to_string();
        writeln!(
            scripts,
            "/// `lua/{name}.lua` (with the reply codes and `lua/common.lua`).\npub static {upper}: Script = Script {{ name: {name:?}, source: {source:?}, sha: {sha:?} }};",
            upper = name.to_uppercase()
        )
        .unwrap();
    }
    writeln!(
        scripts,
        "/// Every script, for checks that must cover them all.\npub static ALL: &[&Script] = &[{}];",
        names
            .iter()
            .map(|n| format!("&{}", n.to_uppercase()))
            .collect::<Vec<_>>()
            .join(", ")
    )
    .unwrap();
    std::fs::write(out.join("scripts.rs"), scripts).unwrap();
}
