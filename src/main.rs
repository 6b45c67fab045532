#[cfg(not(target_arch = "wasm32"))]
fn main() {
    std::process::exit(stem4d::cli::main());
}

#[cfg(target_arch = "wasm32")]
fn main() {}
