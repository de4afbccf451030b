//! `scripts/setup.sh`: what each profile would install, seen by running the script itself on a
//! machine where nothing is installed (`dpkg-query`, `apt-get` and `debootstrap` are stand-ins
//! on PATH that record what they are asked; cargo and rustc are the real ones).

use std::path::Path;
use std::process::Command;

/// Runs `setup.sh PROFILE` with every package missing; what apt-get and debootstrap were asked.
fn asked(profile: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.path().join("asked.log");
    let stub = |name: &str, body: &str| {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    stub("dpkg-query", "exit 1");
    stub("apt-get", &format!("echo \"apt-get $*\" >> {}", log.display()));
    stub(
        "debootstrap",
        &format!("echo \"debootstrap $*\" >> {}; mkdir -p \"$3/usr/sbin\"", log.display()),
    );
    stub("chroot", &format!("echo \"chroot $1\" >> {}", log.display()));
    stub("mv", "true");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = Command::new("bash")
        .arg(root.join("scripts/setup.sh"))
        .arg(profile)
        .env("PATH", path)
        .env("TOPO_TUNE_SLURM_BLOCK_ROOT", dir.path().join("no-root-yet"))
        .output()
        .unwrap();
    (o.status.code(), std::fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn the_example_installs_only_what_building_needs_and_the_tests_install_their_world() {
    let (code, build) = asked("build");
    assert_eq!(code, Some(0), "{build}");
    let install = build.lines().find(|l| l.contains(" install ")).unwrap();
    for p in ["build-essential", "pkg-config", "libhwloc-dev", "libudev-dev"] {
        assert!(install.contains(p), "{install}");
    }
    for p in ["openssh-server", "slurmctld", "munge", "python3-venv", "debootstrap"] {
        assert!(!install.contains(p), "the example needs no {p}: {install}");
    }
    assert!(
        !build.contains("debootstrap "),
        "no Debian root for the example: {build}"
    );

    let (code, test) = asked("test");
    assert_eq!(code, Some(0), "{test}");
    let install = test.lines().find(|l| l.contains(" install ")).unwrap();
    for p in ["libhwloc-dev", "openssh-server", "slurmctld", "munge", "debootstrap"] {
        assert!(install.contains(p), "{install}");
    }
    assert!(test.contains("debootstrap --variant=minbase trixie"), "{test}");
    assert_eq!(asked("bogus").0, Some(2));
}
