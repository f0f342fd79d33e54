//! The format definitions (`../parsers/*.toml`) ship inside the wheel as
//! `specscope/_parsers`: maturin takes them from OUT_DIR (`[tool.maturin] include`, `from =
//! "out-dir"`), since an include keeps its path in the source tree.
use std::path::Path;
use std::{env, fs};

fn main() {
    let manifest = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let source = Path::new(&manifest).join("..").join("parsers");
    let target = Path::new(&out);
    println!("cargo:rerun-if-changed={}", source.display());
    // A crate built without the definitions beside it (cargo package, the fuzz target)
    // needs none: only the wheel carries them.
    let Ok(entries) = fs::read_dir(&source) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "toml") {
            if let Some(name) = path.file_name() {
                fs::copy(&path, target.join(name)).expect("copy a definition");
            }
        }
    }
}
