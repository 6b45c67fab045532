//! One kernel, one place: every kernel module under `src/kernels/` names the file that holds
//! its parity tests (`//! Its parity tests: \`PATH\``), the file exists, and it names the
//! kernel's module back; and every kernel file under `wgsl/` (the preludes aside) is named by
//! a kernel module, so each one reaches its parity tests. A kernel added without its tests,
//! or tests moved without the kernel's note, fail here.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_kernel_names_its_parity_tests_and_they_name_it() {
    let dir = root().join("src/kernels");
    let mut kernels = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        // The registry and naga's reflection are not kernels.
        if matches!(name.as_str(), "mod" | "reflect") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let line = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .find(|l| l.contains("Its parity tests: `"))
            .unwrap_or_else(|| panic!("src/kernels/{name}.rs names no parity tests"));
        let tests = line.split('`').nth(1).unwrap();
        let at = root().join(tests);
        assert!(at.exists(), "src/kernels/{name}.rs: {tests} does not exist");
        let texts: Vec<String> = if at.is_dir() {
            std::fs::read_dir(&at)
                .unwrap()
                .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
                .collect()
        } else {
            vec![std::fs::read_to_string(&at).unwrap()]
        };
        let cited = format!("kernels::{name}");
        let named = format!("src/kernels/{name}.rs");
        assert!(
            texts
                .iter()
                .any(|t| t.contains(&cited) || t.contains(&named)),
            "{tests} never names the kernel {name}"
        );
        kernels += 1;
    }
    assert_eq!(kernels, 13, "kernel modules found");
}

/// The preludes prepended to other kernels (`// stem4d:after …`): no entry point of their own.
const PRELUDES: [&str; 4] = [
    "common.wgsl",
    "decode_common.wgsl",
    "packed_read.wgsl",
    "packed_window.wgsl",
];

#[test]
fn every_wgsl_file_is_named_by_a_kernel_module() {
    let modules: Vec<String> = std::fs::read_dir(root().join("src/kernels"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    let mut files = 0;
    for entry in std::fs::read_dir(root().join("wgsl")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if !name.ends_with(".wgsl") || PRELUDES.contains(&name.as_str()) {
            continue;
        }
        let cited = format!("wgsl/{name}");
        assert!(
            modules.iter().any(|m| m.contains(&cited)),
            "{cited} is named by no module under src/kernels/"
        );
        files += 1;
    }
    assert!(files >= 14, "only {files} kernel files found");
}
