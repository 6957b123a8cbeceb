//! What every BPF object of this crate carries besides its programs: the panic handler `no_std`
//! requires (no program may reach it) and the GPL license the kernel requires of LSM programs.
//! Shared by `main.rs` and `bin/noop.rs`.

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
