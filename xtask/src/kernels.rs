//! The pinned Debian test kernels: download with checksums, unpack, extract vmlinux, build the initramfs.
//!
//! Everything lands in `target/fp-vm/kernels/<name>/` and nothing touches the host root: the .deb is
//! unpacked with `dpkg-deb -x` and `depmod -b` works on the unpacked tree.
use crate::step::{self, Report};
use crate::{cmd, paths};
use anyhow::{Context as _, Result, anyhow, bail, ensure};
use sha2::{Digest as _, Sha256};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A test kernel: an exact Debian package version and its checksum, plus the meta-package that
/// names the newest build of the same series when the pinned one has left the mirror.
pub struct KernelPin {
    pub name: &'static str,
    package: &'static str,
    version: &'static str,
    sha256: &'static str,
    meta: &'static str,
}

/// The kernels `cargo xtask test-kernel --kernel all` runs on, oldest first (generic flavour: the
/// `-cloud` flavours have no 9p).
pub const KERNELS: &[KernelPin] = &[
    KernelPin {
        name: "6.1",
        package: "linux-image-6.1.0-56-amd64",
        version: "6.1.192-2",
        sha256: "a86e2049672f52354c4536a089203b6c82639420424d31c91cf31a181fd4d8f1",
        meta: "linux-image-amd64",
    },
    KernelPin {
        name: "6.12",
        package: "linux-image-6.12.117+deb12-amd64",
        version: "6.12.117-1~deb12u1",
        sha256: "803d36a7cda13355ae8152122470288b2636f19f1cb58162dd9d8b408af9b1b4",
        meta: "linux-image-6.12-amd64",
    },
];

/// Modules the initramfs loads (their dependencies are added from modules.dep): those that mount the
/// host root, and `loop`, whose block devices the floor suite opens (the VM has no other).
const INITRAMFS_MODULES: &[&str] = &["virtio_pci", "9pnet_virtio", "9p", "loop"];

/// PID 1 of the VM. `@INSMOD@` becomes the module loading lines. The per-run scripts come from the
/// run directory, shared as `fprun` (see vm.rs). `/hostfs` keeps a view of the host root without the
/// fresh /tmp and /run, so the run scripts can bind host paths that lie under them.
const INIT_SCRIPT: &str = r#"#!/bin/busybox sh
# PID 1 of the fp test VM: mount the host root read-only, run the command in it, report, power off.
/bin/busybox mkdir -p /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
# Setting a tty mode waits (TCSADRAIN) until the console has sent everything before power-off.
drain() { stty onlcr; }
fail() { echo "fp-vm: $*"; drain; poweroff -f; }
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
@INSMOD@
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 fproot /host \
  || fail "cannot mount the host root over 9p"
mount --bind /host /hostfs
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs devtmpfs /host/dev
mkdir -p /host/dev/pts /host/dev/shm
mount -t devpts devpts /host/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /host/dev/shm
mount -t tmpfs -o mode=1777 tmpfs /host/tmp
mount -t tmpfs -o mode=755 tmpfs /host/run
mount -t securityfs securityfs /host/sys/kernel/security || fail "cannot mount securityfs"
# As systemd mounts it: fp reads the kernel's preemption mode there.
mount -t debugfs debugfs /host/sys/kernel/debug || fail "cannot mount debugfs"
mount -t bpf bpf /host/sys/fs/bpf || fail "cannot mount bpffs"
# As systemd mounts it: cgroup namespaces are delegation boundaries (sub-cgroups of sessions).
mount -t cgroup2 -o nsdelegate cgroup2 /host/sys/fs/cgroup || fail "cannot mount cgroup2"
mkdir -p /host/run/fp-vm
mount -t 9p -o trans=virtio,version=9p2000.L,ro fprun /host/run/fp-vm || fail "cannot mount the run directory"
. /host/run/fp-vm/mounts.sh || fail "cannot mount the host directories of this run"
# Switch root as a real boot does: the host root becomes the root of the mount tree, so the
# kernel resolves paths from the system root exactly as on a host (a chroot would leave them
# under /host). From here on every program comes from the host root, busybox included.
cd /host
mount --move . / || fail "cannot switch root"
exec chroot . /bin/busybox sh -c '/bin/sh /run/fp-vm/command.sh; status=$?
echo "fp-vm: exit status $status"; /bin/busybox stty onlcr; /bin/busybox sync; /bin/busybox poweroff -f'
"#;

/// A kernel ready to boot.
pub struct PreparedKernel {
    pub name: &'static str,
    pub vmlinux: PathBuf,
    pub initrd: PathBuf,
}

pub fn find(name: &str) -> Result<&'static KernelPin> {
    KERNELS.iter().find(|k| k.name == name).ok_or_else(|| {
        let known: Vec<&str> = KERNELS.iter().map(|k| k.name).collect();
        anyhow!("unknown kernel `{name}`: expected one of {}", known.join(", "))
    })
}

pub fn ensure_all(report: Report) -> Result<()> {
    for pin in KERNELS {
        ensure(pin, report)?;
    }
    Ok(())
}

/// Returns the prepared kernel, downloading and building whatever is missing or stale.
pub fn ensure(pin: &'static KernelPin, report: Report) -> Result<PreparedKernel> {
    let dir = paths::vm_dir()?.join("kernels").join(pin.name);
    let prepared = PreparedKernel {
        name: pin.name,
        vmlinux: dir.join("vmlinux"),
        initrd: dir.join("initrd.cpio"),
    };
    let stamp_path = dir.join("stamp");
    let wanted = Stamp { pin: pin_id(pin), recipe: recipe_fingerprint(), resolved: None };
    if let Ok(text) = std::fs::read_to_string(&stamp_path)
        && let Some(stamp) = Stamp::parse(&text)
        && stamp.pin == wanted.pin
        && stamp.recipe == wanted.recipe
        && prepared.vmlinux.is_file()
        && prepared.initrd.is_file()
        && let Some(resolved) = stamp.resolved
    {
        report.ok(&format!(
            "test kernel {} ready ({} {}, sha256 {})",
            pin.name, resolved.package, resolved.version, resolved.sha256
        ));
        return Ok(prepared);
    }
    println!("setup: preparing test kernel {} in {}", pin.name, dir.display());
    step::require_root("build the initramfs (it needs a /dev/console node)")?;
    let resolved = resolve(pin)?;
    let deb = download(&resolved)?;
    let root = dir.join("root");
    remove_dir_if_present(&root)?;
    std::fs::create_dir_all(&root)?;
    println!("setup: unpacking {}", deb.display());
    cmd::run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
    let release = kernel_release(&root)?;
    println!("setup: extracting vmlinux (uncompressed, for PVH boot)");
    let bzimage = std::fs::read(root.join("boot").join(format!("vmlinuz-{release}")))
        .with_context(|| format!("kernel {release}: no /boot/vmlinuz-{release} in the package"))?;
    let vmlinux = dir.join("vmlinux.new");
    std::fs::write(&vmlinux, extract_vmlinux(&bzimage)?)?;
    println!("setup: building the initramfs");
    let initrd = dir.join("initrd.cpio.new");
    build_initramfs(&root, &release, &dir.join("initramfs"), &initrd)?;
    // Renamed into place only now, so a VM booting meanwhile sees whole files.
    std::fs::rename(vmlinux, &prepared.vmlinux)?;
    std::fs::rename(initrd, &prepared.initrd)?;
    let stamp = Stamp { resolved: Some(resolved), ..wanted };
    std::fs::write(&stamp_path, stamp.render())?;
    Ok(prepared)
}

fn pin_id(pin: &KernelPin) -> String {
    format!("{}={}", pin.package, pin.version)
}

/// Changes whenever the initramfs recipe changes, so old images are rebuilt.
fn recipe_fingerprint() -> String {
    hex(&Sha256::digest(format!("{INIT_SCRIPT}\n{}", INITRAMFS_MODULES.join(" "))))
}

/// The record of a prepared kernel: which pin and recipe it was built for, and what was downloaded.
struct Stamp {
    pin: String,
    recipe: String,
    resolved: Option<Resolved>,
}

impl Stamp {
    fn render(&self) -> String {
        let mut text = format!("pin={}\nrecipe={}\n", self.pin, self.recipe);
        if let Some(r) = &self.resolved {
            text += &format!("package={}\nversion={}\nsha256={}\n", r.package, r.version, r.sha256);
        }
        text
    }

    fn parse(text: &str) -> Option<Stamp> {
        let field = |key: &str| {
            text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix('=')).map(str::to_owned)
        };
        Some(Stamp {
            pin: field("pin")?,
            recipe: field("recipe")?,
            resolved: Some(Resolved {
                package: field("package")?,
                version: field("version")?,
                sha256: field("sha256")?,
            }),
        })
    }
}

/// The exact package that will be used and the checksum its download must have.
struct Resolved {
    package: String,
    version: String,
    sha256: String,
}

/// The pinned version if the mirror still has it, else the newest through the meta-package.
fn resolve(pin: &KernelPin) -> Result<Resolved> {
    for attempt in 0..2 {
        if let Some(info) = apt_show(&pin_id(pin))? {
            ensure!(
                info.sha256 == pin.sha256,
                "the mirror's {} has sha256 {}, but the pin says {}",
                pin_id(pin),
                info.sha256,
                pin.sha256
            );
            return Ok(info);
        }
        if let Some(package) = meta_dependency(pin.meta)?
            && let Some(info) = apt_show(&package)?
        {
            println!(
                "warning: pinned {} is gone from the mirror; using {} {} (sha256 {}) through {}",
                pin_id(pin),
                info.package,
                info.version,
                info.sha256,
                pin.meta
            );
            return Ok(info);
        }
        if attempt == 0 {
            // The package lists may be missing or older than the pin.
            step::apt_get_update()?;
        }
    }
    bail!("neither {} nor the meta-package {} is known to apt", pin_id(pin), pin.meta)
}

/// `apt-cache show` of one version (`package` or `package=version`); None when apt does not know it.
fn apt_show(spec: &str) -> Result<Option<Resolved>> {
    let out = cmd::try_output(Command::new("apt-cache").args(["show", "--no-all-versions", spec]))?;
    if !out.status.success() {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| {
        text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(": ")).map(str::to_owned)
    };
    Ok(match (field("Package"), field("Version"), field("SHA256")) {
        (Some(package), Some(version), Some(sha256)) => Some(Resolved { package, version, sha256 }),
        _ => None,
    })
}

fn meta_dependency(meta: &str) -> Result<Option<String>> {
    let out = cmd::try_output(Command::new("apt-cache").args(["depends", meta]))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Depends: "))
        .filter(|dep| dep.starts_with("linux-image-"))
        .map(str::to_owned))
}

/// Downloads the .deb into `target/fp-vm/debs/` (kept: a second setup reuses it) and checks its sha256.
fn download(resolved: &Resolved) -> Result<PathBuf> {
    let dir =
        paths::vm_dir()?.join("debs").join(format!("{}_{}", resolved.package, resolved.version));
    if let Some(deb) = find_deb(&dir)?
        && sha256_file(&deb)? == resolved.sha256
    {
        return Ok(deb);
    }
    remove_dir_if_present(&dir)?;
    std::fs::create_dir_all(&dir)?;
    println!("setup: downloading {} {}", resolved.package, resolved.version);
    // apt's download sandbox user cannot write to a root-owned target directory.
    cmd::run(
        Command::new("apt-get")
            .args(["download", "-q", "-o", "APT::Sandbox::User=root"])
            .arg(format!("{}={}", resolved.package, resolved.version))
            .current_dir(&dir),
    )?;
    let deb = find_deb(&dir)?
        .ok_or_else(|| anyhow!("apt-get download left no .deb in {}", dir.display()))?;
    let actual = sha256_file(&deb)?;
    ensure!(
        actual == resolved.sha256,
        "{}: sha256 {actual}, expected {}",
        deb.display(),
        resolved.sha256
    );
    println!("setup: {} sha256 {actual} verified", deb.display());
    Ok(deb)
}

fn find_deb(dir: &Path) -> Result<Option<PathBuf>> {
    if !dir.is_dir() {
        return Ok(None);
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "deb") {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).with_context(|| format!("open {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(hex(&hasher.finalize()));
        }
        hasher.update(&buf[..n]);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn remove_dir_if_present(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("remove {}", dir.display()))
        }
        _ => Ok(()),
    }
}

/// The one `lib/modules/<release>` directory of an unpacked kernel package.
fn kernel_release(root: &Path) -> Result<String> {
    let modules = root.join("lib/modules");
    let mut releases = Vec::new();
    for entry in
        std::fs::read_dir(&modules).with_context(|| format!("read {}", modules.display()))?
    {
        releases.push(entry?.file_name().to_string_lossy().into_owned());
    }
    match releases.as_slice() {
        [release] => Ok(release.clone()),
        _ => bail!("expected one kernel release in {}, found {releases:?}", modules.display()),
    }
}

/// Decompresses the kernel ELF out of a bzImage, using the payload fields of the x86 boot header.
fn extract_vmlinux(bzimage: &[u8]) -> Result<Vec<u8>> {
    let u32_at = |offset: usize| -> Result<u32> {
        let bytes = bzimage.get(offset..offset + 4).ok_or_else(|| anyhow!("bzImage too short"))?;
        Ok(u32::from_le_bytes(bytes.try_into()?))
    };
    ensure!(bzimage.get(0x202..0x206) == Some(b"HdrS"), "not a bzImage (no HdrS header)");
    let protocol = u16::from_le_bytes([bzimage[0x206], bzimage[0x207]]);
    ensure!(protocol >= 0x208, "boot protocol {protocol:#x} has no payload fields");
    let setup_sectors = match bzimage[0x1f1] {
        0 => 4,
        n => usize::from(n),
    };
    let start = (setup_sectors + 1) * 512 + usize::try_from(u32_at(0x248)?)?;
    let length = usize::try_from(u32_at(0x24c)?)?;
    let payload = bzimage
        .get(start..start + length)
        .ok_or_else(|| anyhow!("bzImage payload lies outside the file"))?;
    // The build appends the decompressed size as 4 little-endian bytes after the compressed stream.
    let (stream, size) =
        payload.split_at(length.checked_sub(4).ok_or_else(|| anyhow!("empty payload"))?);
    let expected_len = usize::try_from(u32::from_le_bytes(size.try_into()?))?;
    let decompressor: &[&str] = match stream {
        [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => &["xz", "-dc"],
        [0x28, 0xb5, 0x2f, 0xfd, ..] => &["zstd", "-dcq"],
        [0x1f, 0x8b, ..] => &["gzip", "-dc"],
        _ => {
            bail!("unsupported bzImage compression (magic {})", hex(&stream[..stream.len().min(6)]))
        }
    };
    let elf = pipe_through(decompressor, stream)?;
    ensure!(elf.starts_with(b"\x7fELF"), "the decompressed kernel is not an ELF file");
    ensure!(
        elf.len() == expected_len,
        "decompressed kernel is {} bytes, the bzImage says {expected_len}",
        elf.len()
    );
    Ok(elf)
}

fn pipe_through(argv: &[&str], input: &[u8]) -> Result<Vec<u8>> {
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", argv[0]))?;
    let mut stdin = child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?;
    let output = std::thread::scope(|scope| {
        scope.spawn(move || stdin.write_all(input));
        child.wait_with_output()
    })?;
    ensure!(output.status.success(), "`{}` failed ({})", argv.join(" "), output.status);
    Ok(output.stdout)
}

/// Builds a newc initramfs: static busybox, the 9p modules (decompressed) and /init.
fn build_initramfs(root: &Path, release: &str, staging: &Path, initrd: &Path) -> Result<()> {
    cmd::run(Command::new("depmod").arg("-b").arg(root).arg(release))?;
    let modules_dir = root.join("lib/modules").join(release);
    let dep_text = std::fs::read_to_string(modules_dir.join("modules.dep"))?;
    let builtin = std::fs::read_to_string(modules_dir.join("modules.builtin")).unwrap_or_default();
    let order = load_order(&dep_text, &builtin, INITRAMFS_MODULES)?;

    remove_dir_if_present(staging)?;
    for dir in ["bin", "dev", "proc", "sys", "host", "hostfs", "lib/modules"] {
        std::fs::create_dir_all(staging.join(dir))?;
    }
    std::fs::copy("/bin/busybox", staging.join("bin/busybox"))
        .context("copy /bin/busybox (install busybox-static)")?;
    let mut insmod = String::new();
    for module_path in &order {
        let name = module_name(module_path);
        let target = format!("lib/modules/{name}.ko");
        let source = modules_dir.join(module_path);
        let bytes = match module_path.rsplit_once(".ko") {
            Some((_, ".xz")) => pipe_through(&["xz", "-dc"], &std::fs::read(&source)?)?,
            Some((_, ".zst")) => pipe_through(&["zstd", "-dcq"], &std::fs::read(&source)?)?,
            Some((_, "")) => std::fs::read(&source)?,
            _ => bail!("unsupported module file {module_path}"),
        };
        std::fs::write(staging.join(&target), bytes)?;
        insmod += &format!("insmod /{target} || fail \"cannot load {name}\"\n");
    }
    let init = staging.join("init");
    std::fs::write(&init, INIT_SCRIPT.replace("@INSMOD@", insmod.trim_end()))?;
    std::fs::set_permissions(&init, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    // The kernel opens /dev/console for PID 1 before /init can mount devtmpfs.
    cmd::run(
        Command::new("mknod")
            .args(["-m", "600"])
            .arg(staging.join("dev/console"))
            .args(["c", "5", "1"]),
    )?;
    let archive = std::fs::File::create(initrd)?;
    cmd::run(
        Command::new("sh")
            .args(["-c", "find . -print0 | cpio --null -o -H newc -R 0:0 --quiet"])
            .current_dir(staging)
            .stdout(archive),
    )
}

/// `kernel/fs/9p/9p.ko.xz` -> `9p` (module names use `_` where file names may use `-`).
fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.split(".ko").next().unwrap_or(file).replace('-', "_")
}

/// The module files to insmod, dependencies first, for `wanted` (builtin modules are skipped).
fn load_order(modules_dep: &str, builtin: &str, wanted: &[&str]) -> Result<Vec<String>> {
    let deps: std::collections::HashMap<String, (String, Vec<String>)> = modules_dep
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(path, deps)| {
            let deps = deps.split_whitespace().map(module_name).collect();
            (module_name(path), (path.to_owned(), deps))
        })
        .collect();
    let builtin: Vec<String> = builtin.lines().map(module_name).collect();
    let mut order = Vec::new();
    let mut stack: Vec<(String, bool)> =
        wanted.iter().rev().map(|m| (m.to_string(), false)).collect();
    while let Some((name, deps_done)) = stack.pop() {
        let Some((path, module_deps)) = deps.get(&name) else {
            ensure!(builtin.contains(&name), "module {name} is neither in modules.dep nor builtin");
            continue;
        };
        if order.contains(path) {
            continue;
        }
        if deps_done {
            order.push(path.clone());
        } else {
            stack.push((name, true));
            stack.extend(module_deps.iter().rev().map(|d| (d.clone(), false)));
        }
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_order_puts_dependencies_first_once_and_skips_builtins() {
        let dep = "kernel/fs/9p/9p.ko.xz: kernel/net/9p/9pnet.ko.xz kernel/fs/netfs/netfs.ko.xz\n\
                   kernel/net/9p/9pnet_virtio.ko.xz: kernel/net/9p/9pnet.ko.xz kernel/drivers/virtio/virtio_ring.ko.xz\n\
                   kernel/net/9p/9pnet.ko.xz:\n\
                   kernel/fs/netfs/netfs.ko.xz:\n";
        let builtin = "kernel/drivers/virtio/virtio_ring.ko\nkernel/drivers/virtio/virtio_pci.ko\n";
        let order = load_order(dep, builtin, &["virtio_pci", "9pnet_virtio", "9p"]).unwrap();
        assert_eq!(
            order,
            [
                "kernel/net/9p/9pnet.ko.xz",
                "kernel/net/9p/9pnet_virtio.ko.xz",
                "kernel/fs/netfs/netfs.ko.xz",
                "kernel/fs/9p/9p.ko.xz"
            ]
        );
    }

    #[test]
    fn load_order_names_a_missing_module() {
        let err = load_order("", "", &["9p"]).unwrap_err();
        assert!(err.to_string().contains("module 9p"), "{err}");
    }

    #[test]
    fn stamp_round_trips() {
        let stamp = Stamp {
            pin: "p=1".into(),
            recipe: "r".into(),
            resolved: Some(Resolved {
                package: "p".into(),
                version: "1".into(),
                sha256: "ab".into(),
            }),
        };
        let parsed = Stamp::parse(&stamp.render()).unwrap();
        assert_eq!(parsed.render(), stamp.render());
    }

    /// A minimal bzImage: one setup sector, the boot header, then `payload` at offset 1024.
    fn bzimage(payload: &[u8]) -> Vec<u8> {
        let mut image = vec![0; 1024];
        image[0x1f1] = 1;
        image[0x202..0x206].copy_from_slice(b"HdrS");
        image[0x206..0x208].copy_from_slice(&0x020f_u16.to_le_bytes());
        image[0x24c..0x250].copy_from_slice(&u32::try_from(payload.len()).unwrap().to_le_bytes());
        image.extend_from_slice(payload);
        image
    }

    #[test]
    fn extract_vmlinux_decompresses_the_payload_and_checks_its_size() {
        let elf = b"\x7fELF and the rest of a kernel";
        let mut payload = pipe_through(&["gzip", "-c"], elf).unwrap();
        payload.extend_from_slice(&u32::try_from(elf.len()).unwrap().to_le_bytes());
        assert_eq!(extract_vmlinux(&bzimage(&payload)).unwrap(), elf);

        let last = payload.len() - 4;
        payload[last] += 1;
        let err = extract_vmlinux(&bzimage(&payload)).unwrap_err();
        assert!(err.to_string().contains("the bzImage says"), "{err}");
    }

    #[test]
    fn extract_vmlinux_rejects_non_bzimage() {
        assert!(extract_vmlinux(&[0; 4096]).unwrap_err().to_string().contains("HdrS"));
    }
}
