//! Rebuild when bpf-linker changes (it is an undeclared build tool of this crate).
fn main() {
    match which::which("bpf-linker") {
        Ok(path) => println!("cargo:rerun-if-changed={}", path.display()),
        Err(_) => println!("cargo:warning=bpf-linker not on PATH: run `cargo xtask setup`"),
    }
}
