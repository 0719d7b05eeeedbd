//! Assembles each Lua script (`lua/common.lua` + `lua/<name>.lua`) and computes its SHA1 at build
//! time, so that a request can send EVALSHA without hashing anything.

use std::fmt::Write;

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
    let common = std::fs::read_to_string(dir.join("common.lua")).expect("lua/common.lua");
    println!("cargo:rerun-if-changed=lua");
    let mut out = String::new();
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
    for name in &names {
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
