//! A backend never borrows the CPU reference's code: parity compares two implementations only
//! if no GPU-side module calls `crate::cpu` (the engine, its kernels' host side, the upload,
//! the GPU products and the display's GPU side). The session may fall back to the reference
//! (on what the GPU declines), the CLI runs it and the parity matrix (`src/parity.rs`)
//! compares with it; none of them is a backend.

use std::path::Path;

const BACKEND_FOLDERS: [&str; 4] = ["src/gpu", "src/kernels", "src/upload", "src/products"];
const BACKEND_FILES: [&str; 1] = ["src/display/gpu.rs"];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_backend_module_imports_the_cpu_reference() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for d in BACKEND_FOLDERS {
        rust_files(&root.join(d), &mut files);
    }
    files.extend(BACKEND_FILES.iter().map(|f| root.join(f)));
    assert!(files.len() > 20, "the backend's files were found");
    let mut offenders = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("a source file reads");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("crate::cpu")
                || code.contains("stem4d::cpu")
                || code.contains("super::cpu")
            {
                offenders.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "backend modules use the CPU reference:\n{}",
        offenders.join("\n")
    );
}
