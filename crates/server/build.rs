//! Rebuilds the server when a file of the embedded web UI changes: `include_dir!` alone is not
//! tracked by cargo, so without this a changed `ui/` would ship stale. `ui/tests` (the browser
//! suite) is not served and does not trigger rebuilds. A new top-level file is picked up with
//! the change to an existing file that imports it.

fn main() {
    let ui = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ui");
    if let Ok(entries) = std::fs::read_dir(&ui) {
        for entry in entries.flatten() {
            if entry.file_name() != "tests" {
                println!("cargo:rerun-if-changed={}", entry.path().display());
            }
        }
    }
}
